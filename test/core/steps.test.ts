import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DiscardError } from '../../base/errors.js';
import { getJob } from '../../core/admin.js';
import { defineJob, type JobDefinition } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { claimJobs } from '../../db/statements/claim.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-steps', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});
const { at } = useSuppliedClock();

const payload = z.object({ n: z.number().default(0) });
const instant = { type: 'constant', delayMs: 0 } as const;

const run = (jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, ...options }).runInvocation({
    remainingMs: 60_000,
  });
// biome-ignore lint/suspicious/noExplicitAny: kinds of any payload.
const enqueue = async (kind: JobDefinition<any, any>, p: Record<string, unknown> = {}) =>
  (await q.enqueueMany(t.db, [kind.with(p)]))[0]?.id as string;
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;
const steps = async (id: string) =>
  (
    await t.admin.query(
      `select name, position, type, state, attempts, result, last_error from "${t.schema}".job_steps where job_id = $1 order by position`,
      [id],
    )
  ).rows;

describe('durable steps (ctx.step)', () => {
  it('a completed step returns its stored result on the retry and never runs again; only the failing code reruns', async () => {
    const ran: string[] = [];
    let failOnce = true;
    const report = defineJob({
      kind: 'report',
      payload,
      backoff: instant,
      handler: async (_p, ctx) => {
        const data = await ctx.step('collect', () => {
          ran.push('collect');
          return { rows: [1, 2, 3], at: new Date('2026-01-02T03:04:05Z') };
        });
        const file = await ctx.step('build', async () => {
          ran.push('build');
          return `file-${data.rows.length}`;
        });
        const nothing = await ctx.step('note', () => {
          ran.push('note');
        });
        if (failOnce) {
          failOnce = false;
          throw new Error('notify failed');
        }
        return { file, data, nothing: nothing === undefined };
      },
    });
    const id = await enqueue(report);
    // The job's own retry is claimed by the next invocation (a claim does not see the settle it carries).
    expect(await run([report])).toMatchObject({ completed: 0, retried: 1 });
    expect(await run([report])).toMatchObject({ completed: 1, retried: 0 });
    expect(ran).toEqual(['collect', 'build', 'note']);
    const done = await job(id);
    // The stored result is JSON: the retry saw the Date as its ISO string, as the first run's step did.
    expect(done.result).toEqual({
      file: 'file-3',
      data: { rows: [1, 2, 3], at: '2026-01-02T03:04:05.000Z' },
      nothing: true,
    });
    expect(done.attempt).toBe(2);
    expect(await steps(id)).toEqual([
      {
        name: 'collect',
        position: 0,
        type: 'run',
        state: 'completed',
        attempts: 1,
        result: { rows: [1, 2, 3], at: '2026-01-02T03:04:05.000Z' },
        last_error: null,
      },
      { name: 'build', position: 1, type: 'run', state: 'completed', attempts: 1, result: 'file-3', last_error: null },
      { name: 'note', position: 2, type: 'run', state: 'completed', attempts: 1, result: null, last_error: null },
    ]);
  });

  it("a failing step retries on its own attempts and backoff; the job's attempts are not used", async () => {
    const ran: string[] = [];
    let failures = 2;
    const flaky = defineJob({
      kind: 'flaky',
      payload,
      maxAttempts: 2,
      handler: async (_p, ctx) => {
        await ctx.step('first', () => ran.push('first'));
        await ctx.step(
          'partner',
          () => {
            ran.push('partner');
            if (failures-- > 0) throw new Error(`partner 503 (${failures + 1} left)`);
            return 'ok';
          },
          { maxAttempts: 3, backoff: instant },
        );
      },
    });
    const id = await enqueue(flaky);
    expect(await run([flaky])).toMatchObject({ completed: 1, retried: 2, dead: 0 });
    expect(ran).toEqual(['first', 'partner', 'partner', 'partner']);
    const done = await job(id);
    expect(done.state).toBe('completed');
    expect(done.attempt).toBe(1); // two step retries, and still the job's first attempt
    expect(done.lastError).toMatchObject({ step: 'partner', message: 'partner 503 (1 left)' });
    expect((await steps(id))[1]).toMatchObject({ name: 'partner', state: 'completed', attempts: 3 });
  });

  it('a step out of attempts sends the job to the DLQ as step_failed, its last error on the step', async () => {
    const hopeless = defineJob({
      kind: 'hopeless',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step(
          'charge',
          () => {
            throw new Error('card declined');
          },
          { maxAttempts: 2, backoff: instant },
        );
      },
    });
    const id = await enqueue(hopeless);
    expect(await run([hopeless])).toMatchObject({ dead: 1, retried: 1 });
    const dead = await job(id);
    expect(dead).toMatchObject({ state: 'dead', deadReason: 'step_failed', attempt: 1 });
    expect(dead.lastError?.message).toContain('step "charge" failed 2 times (maxAttempts 2): card declined');
    expect(await steps(id)).toMatchObject([
      { name: 'charge', state: 'failed', attempts: 2, last_error: { message: 'card declined', step: 'charge' } },
    ]);
  });

  it('a DiscardError in a step ends the job at once with its reason', async () => {
    const kind = defineJob({
      kind: 'discards',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('validate', () => {
          throw new DiscardError('no such customer', { reason: 'unknown_customer' });
        });
      },
    });
    const id = await enqueue(kind);
    expect(await run([kind])).toMatchObject({ dead: 1 });
    expect(await job(id)).toMatchObject({ deadReason: 'unknown_customer' });
    expect(await steps(id)).toMatchObject([{ name: 'validate', state: 'failed', attempts: 1 }]);
  });

  it('code that reaches its steps in another order than the recorded one is refused, never mixed', async () => {
    let version = 1;
    const ran: string[] = [];
    const kind = defineJob({
      kind: 'changes',
      payload,
      backoff: instant,
      handler: async (_p, ctx) => {
        const order = version === 1 ? ['a', 'b'] : ['a', 'c', 'b'];
        for (const name of order) await ctx.step(name, () => ran.push(name));
        if (version === 1) {
          version = 2; // deployed between this attempt and its retry
          throw new Error('fails after b');
        }
      },
    });
    const id = await enqueue(kind);
    expect(await run([kind])).toMatchObject({ dead: 0, retried: 1 });
    expect(await run([kind])).toMatchObject({ dead: 1, retried: 0 });
    expect(ran).toEqual(['a', 'b']);
    const dead = await job(id);
    expect(dead.deadReason).toBe('step_order_changed');
    expect(dead.lastError?.message).toContain('step 2 is "c" (run), but this job recorded "b" there');
  });

  it('refuses a step name used twice, a bad name, too many steps and a result over maxResultBytes, writing nothing', async () => {
    const cases: [string, (ctx: Parameters<NonNullable<JobDefinition['handler']>>[1]) => Promise<unknown>, string][] = [
      [
        'twice',
        async (ctx) => {
          await ctx.step('x', () => 1);
          await ctx.step('x', () => 2);
        },
        'step_name_reused',
      ],
      ['long', async (ctx) => ctx.step('n'.repeat(201), () => 1), 'invalid_step'],
      [
        'many',
        async (ctx) => {
          for (let i = 0; i < 3; i++) await ctx.step(`s${i}`, () => i);
        },
        'too_many_steps',
      ],
      ['big', async (ctx) => ctx.step('blob', () => 'x'.repeat(2_000)), 'invalid_result'],
      // Longer than any invocation of this worker (60 s): refused, not handed on forever.
      ['too-long', async (ctx) => ctx.step('slow', () => 1, { timeoutMs: 120_000 }), 'step_too_long'],
      ['nul-key', async (ctx) => ctx.waitForSignal('w', { key: 'a\u0000b', timeoutMs: 1_000 }), 'invalid_step'],
    ];
    for (const [name, handler, reason] of cases) {
      const kind = defineJob({ kind: `refuse-${name}`, payload, maxSteps: 2, handler: (_p, ctx) => handler(ctx) });
      const id = await enqueue(kind);
      expect({ name, summary: await run([kind], { maxResultBytes: 1_000 }) }).toMatchObject({
        name,
        summary: { dead: 1 },
      });
      expect((await job(id)).deadReason).toBe(reason);
      const written = await steps(id);
      expect(written.map((s) => s.name)).toEqual(name === 'twice' ? ['x'] : name === 'many' ? ['s0', 's1'] : []);
      expect((await job(id)).attempt).toBe(1);
    }
  });

  it("a transactional step's writes and its result commit together: exactly once across a retry", async () => {
    await t.admin.query(`create table if not exists "${t.schema}".invoices (order_id int primary key)`);
    await t.admin.query(`truncate "${t.schema}".invoices`);
    let failAfter = true;
    const invoice = defineJob({
      kind: 'invoice',
      payload,
      backoff: instant,
      handler: async (p, ctx) => {
        const number = await ctx.step('issue', { transaction: true }, async (tx) => {
          await tx.execute(sql`insert into ${sql.identifier(t.schema)}.invoices (order_id) values (${p.n})`);
          return `INV-${p.n}`;
        });
        if (failAfter) {
          failAfter = false;
          throw new Error('mail failed');
        }
        return number;
      },
    });
    const id = await enqueue(invoice, { n: 7 });
    expect(await run([invoice])).toMatchObject({ completed: 0, retried: 1 });
    expect(await run([invoice])).toMatchObject({ completed: 1, retried: 0 });
    expect((await job(id)).result).toBe('INV-7');
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".invoices`)).rows[0].n).toBe(1);
  });

  it('a transactional step whose lease is lost before it commits rolls back: no write, no stored result', async () => {
    await t.admin.query(`create table if not exists "${t.schema}".invoices (order_id int primary key)`);
    await t.admin.query(`truncate "${t.schema}".invoices`);
    const invoice = defineJob({
      kind: 'invoice-lost',
      payload,
      handler: async (p, ctx) => {
        await ctx.step('issue', { transaction: true }, async (tx) => {
          await tx.execute(sql`insert into ${sql.identifier(t.schema)}.invoices (order_id) values (${p.n})`);
          // Another holder takes the job meanwhile (a rescue after this lease ran out).
          await t.admin.query(`update "${t.schema}".jobs set lease_token = gen_random_uuid() where id = $1`, [ctx.id]);
        });
      },
    });
    const id = await enqueue(invoice, { n: 8 });
    expect(await run([invoice])).toMatchObject({ leaseLost: 1, completed: 0 });
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".invoices`)).rows[0].n).toBe(0);
    expect(await steps(id)).toEqual([]);
  });

  it("a job rescued from a holder whose lease ran out mid-step replays the recorded step, reruns the one in flight, and the stale holder's record is lease_lost", async () => {
    const ran: string[] = [];
    let rescuer: Promise<Awaited<ReturnType<typeof run>>> | undefined;
    // biome-ignore lint/suspicious/noExplicitAny: the kind's handler runs the kind (its rescuer).
    const rescued: JobDefinition<any, any> = defineJob({
      kind: 'rescued',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('one', () => {
          ran.push(`one@${ctx.attempt}`);
          return 'first';
        });
        await ctx.step('two', async () => {
          ran.push(`two@${ctx.attempt}`);
          if (rescuer) return;
          // This holder's lease runs out (an extension lost with a crash of the database leaves the
          // claim's) and another invocation rescues the job while this step still runs.
          await t.admin.query(
            `update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second' where id = $1`,
            [ctx.id],
          );
          rescuer = run([rescued]);
          await rescuer;
        });
      },
    });
    const id = await enqueue(rescued);
    expect(await run([rescued])).toMatchObject({ completed: 0, leaseLost: 1 });
    expect(await rescuer).toMatchObject({ completed: 1, leaseLost: 0 });
    expect(ran).toEqual(['one@1', 'two@1', 'two@2']);
    expect(await job(id)).toMatchObject({ state: 'completed', attempt: 2 });
    expect(await steps(id)).toMatchObject([
      { name: 'one', state: 'completed', attempts: 1, result: 'first' },
      { name: 'two', state: 'completed', attempts: 1 },
    ]);
  });
});

describe('continuation within the budget', () => {
  it('10 steps of 2 s in invocations with 5 s left: done across ≥ 4 invocations, never killed mid-step, no attempt used', async () => {
    const clock = new ManualClock();
    const ran: number[] = [];
    const long = defineJob({
      kind: 'long',
      payload,
      timeoutMs: 2_500,
      handler: async (_p, ctx) => {
        let total = 0;
        for (let i = 0; i < 10; i++) {
          total += await ctx.step(`part-${i}`, () => {
            ran.push(i);
            clock.advance(2_000);
            return i;
          });
        }
        return total;
      },
    });
    const id = await enqueue(long);
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [long],
      logger: silentLogger,
      clock,
      safetyMarginMs: 500,
    });
    const summaries = [];
    for (let i = 0; i < 10 && (await job(id)).state !== 'completed'; i++) {
      summaries.push(await worker.runInvocation({ remainingMs: 5_000 }));
    }
    expect(ran).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]); // each step once: none cut short and rerun
    expect(summaries.length).toBeGreaterThanOrEqual(4);
    expect(summaries.slice(0, -1).every((s) => s.suspended === 1 && s.retried === 0 && s.dead === 0)).toBe(true);
    expect(summaries.at(-1)).toMatchObject({ completed: 1 });
    const done = await job(id);
    expect(done).toMatchObject({ state: 'completed', result: 45, attempt: 1 });
    expect(done.lastError).toBeNull();
  });
});

describe('continuation with fan-out', () => {
  it('an invocation that handed a job on starts one fresh invocation at once; a sleep starts none', async () => {
    const clock = new ManualClock();
    const starts: number[] = [];
    const fanOut = { start: async (count: number) => void starts.push(count) };
    const worker = (kind: JobDefinition) =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [kind],
        logger: silentLogger,
        clock,
        safetyMarginMs: 500,
        fanOut,
        maxInvocations: 4,
      });
    const twoParts = defineJob({
      kind: 'two-parts',
      payload,
      timeoutMs: 2_500,
      handler: async (_p, ctx) => {
        for (const part of ['a', 'b', 'c']) await ctx.step(part, () => clock.advance(2_000));
      },
    });
    await enqueue(twoParts);
    expect(await worker(twoParts).runInvocation({ remainingMs: 5_000 })).toMatchObject({ suspended: 1 });
    expect(starts).toEqual([1]);
    const napper = defineJob({
      kind: 'napper',
      payload,
      handler: async (_p, ctx) => {
        await ctx.sleep('nap', 60_000);
      },
    });
    await enqueue(napper);
    expect(await worker(napper).runInvocation({ remainingMs: 60_000 })).toMatchObject({ suspended: 1 });
    expect(starts).toEqual([1]);
  });
});

describe('durable sleep', () => {
  it('a sleeping job leaves the invocation without using an attempt, and its sleep is done when it runs again', async () => {
    const ran: string[] = [];
    const onboarding = defineJob({
      kind: 'onboarding',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('welcome', () => ran.push('welcome'));
        await ctx.sleep('three-days', 3 * 86_400_000);
        await ctx.step('reminder', () => ran.push('reminder'));
      },
    });
    const id = await enqueue(onboarding);
    const summary = await run([onboarding]);
    expect(summary).toMatchObject({ suspended: 1, completed: 0, retried: 0 });
    const sleeping = await t.admin.query(
      `select state, attempt, run_at > now() + interval '71 hours' as far from "${t.schema}".jobs where id = $1`,
      [id],
    );
    expect(sleeping.rows[0]).toEqual({ state: 'queued', attempt: 0, far: true });
    expect(ran).toEqual(['welcome']);
    // sleepUntil a moment already past: the job runs on in the same invocation.
    const past = defineJob({
      kind: 'past',
      payload,
      handler: async (_p, ctx) => {
        await ctx.sleepUntil('until', new Date(Date.now() - 1_000));
        return ctx.step('after', () => 'woke');
      },
    });
    const other = await enqueue(past);
    expect(await run([past])).toMatchObject({ suspended: 1, completed: 1 });
    expect(await job(other)).toMatchObject({ state: 'completed', result: 'woke', attempt: 1 });
    expect((await steps(other)).map((s) => [s.name, s.type])).toEqual([
      ['until', 'sleep'],
      ['after', 'run'],
    ]);
  });

  it('1,000 jobs sleeping an hour are claimed by none before their time and by the first claim after it', async () => {
    const sleeper = defineJob({
      kind: 'sleeper',
      payload,
      handler: async (_p, ctx) => {
        await ctx.sleep('hour', 3_600_000);
      },
    });
    await q.enqueueMany(
      t.db,
      Array.from({ length: 1_000 }, (_, n) => sleeper.with({ n })),
    );
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [sleeper],
      logger: silentLogger,
      concurrency: 100,
      batchSize: 200,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ suspended: 1_000, completed: 0 });
    const leases = [{ kind: 'sleeper', leaseMs: 30_000 }];
    // The wake-up time was set on the database's clock when each job went to sleep (now).
    const before = await claimJobs(t.db.executor, t.schema, {
      leases,
      limit: 2_000,
      invocationId: 'early',
      now: at(-60_000 + 3_540_000),
    });
    expect(before.jobs).toHaveLength(0);
    const after = await claimJobs(t.db.executor, t.schema, {
      leases,
      limit: 2_000,
      invocationId: 'woke',
      now: at(-60_000 + 3_660_000),
    });
    expect(after.jobs).toHaveLength(1_000);
  });
});

describe('signals (ctx.waitForSignal, signal)', () => {
  const activation = (seen: unknown[]) =>
    defineJob({
      kind: 'activation',
      payload: z.object({ user: z.string() }),
      handler: async (p, ctx) => {
        const got = await ctx.waitForSignal<{ plan: string }>('activated', {
          key: `activate:${p.user}`,
          timeoutMs: 3_600_000,
        });
        seen.push(got);
        return got.timedOut ? 'timed out' : got.payload.plan;
      },
    });

  it('a waiting job uses no attempt and no invocation; a signal wakes it at once with its payload', async () => {
    const seen: unknown[] = [];
    const kind = activation(seen);
    const id = await enqueue(kind, { user: 'ada' });
    expect(await run([kind])).toMatchObject({ suspended: 1, completed: 0 });
    const waiting = await t.admin.query(
      `select j.state, j.attempt, j.run_at > now() + interval '59 minutes' as far, s.state as step
       from "${t.schema}".jobs j join "${t.schema}".job_steps s on s.job_id = j.id where j.id = $1`,
      [id],
    );
    expect(waiting.rows[0]).toEqual({ state: 'queued', attempt: 0, far: true, step: 'waiting' });
    expect(await q.signal(t.db, 'activate:ada', { plan: 'pro' })).toMatchObject({ woken: 1 });
    expect(await run([kind])).toMatchObject({ completed: 1 });
    expect(seen).toEqual([{ timedOut: false, payload: { plan: 'pro' } }]);
    expect(await job(id)).toMatchObject({ state: 'completed', result: 'pro', attempt: 1 });
  });

  it('a signal sent before the wait is kept for it; one sent in a rolled-back transaction never existed', async () => {
    const seen: unknown[] = [];
    const kind = activation(seen);
    expect(await q.signal(t.db, 'activate:bo', { plan: 'team' })).toMatchObject({ woken: 0 });
    await t.db.db
      .transaction(async (tx) => {
        await q.signal(tx, 'activate:cy', { plan: 'never' });
        throw new Error('the order failed: roll back');
      })
      .catch(() => {});
    const bo = await enqueue(kind, { user: 'bo' });
    const cy = await enqueue(kind, { user: 'cy' });
    expect(await run([kind])).toMatchObject({ completed: 1, suspended: 1 });
    expect(await job(bo)).toMatchObject({ state: 'completed', result: 'team' });
    expect(await job(cy)).toMatchObject({ state: 'queued' });
    const signals = await t.admin.query(`select key, taken_by::text from "${t.schema}".signals order by id`);
    expect(signals.rows).toEqual([{ key: 'activate:bo', taken_by: bo }]);
  });

  it('a wait whose timeout passes returns { timedOut: true }; bad keys and payloads are refused, nothing written', async () => {
    const impatient = defineJob({
      kind: 'impatient',
      payload,
      handler: async (_p, ctx) => ctx.waitForSignal('reply', { key: 'reply:1', timeoutMs: 1 }),
    });
    const id = await enqueue(impatient);
    // The first invocation waits (suspends until 1 ms later); the next finds the timeout passed.
    await run([impatient]);
    for (let i = 0; i < 5 && (await job(id)).state !== 'completed'; i++) await run([impatient]);
    expect(await job(id)).toMatchObject({ state: 'completed', result: { timedOut: true } });
    await expect(q.signal(t.db, '', 1)).rejects.toThrow('a signal key must be a string of 1 to 500 characters');
    await expect(q.signal(t.db, 'k', 'x'.repeat(300 * 1024))).rejects.toMatchObject({ code: 'payload_too_large' });
    await expect(q.signal(t.db, 'k', { n: 1n })).rejects.toThrow('is not JSON');
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".signals`)).rows[0].n).toBe(0);
  });
});
