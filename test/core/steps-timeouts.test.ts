import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getJob } from '../../core/admin.js';
import { defineJob, type JobDefinition } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { executorOf } from '../../db/executor-of.js';
import { buryDoomed } from '../../db/statements/bury.js';
import { claimJobs } from '../../db/statements/claim.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

// A step's own timeout (StepOptions.timeoutMs) and the job's deadline, as bounds on a job with
// durable steps. The invocation's time is a ManualClock (a step "takes" 3 s by advancing it); the
// database's time is supplied to the statements (`at`) or moved on the rows — nobody sleeps.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-steps-timeouts', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});
const { at } = useSuppliedClock();

const payload = z.object({ n: z.number().default(0) });
const instant = { type: 'constant', delayMs: 0 } as const;

const worker = (jobs: WorkerOptions['jobs'], clock: ManualClock, options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, clock, ...options });
// biome-ignore lint/suspicious/noExplicitAny: kinds of any payload.
const enqueue = async (kind: JobDefinition<any, any>, p: Record<string, unknown> = {}, options = {}) =>
  (await q.enqueueMany(t.db, [kind.with(p, options)]))[0]?.id as string;
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;
const row = async (id: string) =>
  (
    await t.admin.query(
      `select state, attempt, dead_reason, run_at, lease_expires_at, last_error from "${t.schema}".jobs where id = $1`,
      [id],
    )
  ).rows[0];
const steps = async (id: string) =>
  (
    await t.admin.query(
      `select name, type, state, attempts, result, last_error from "${t.schema}".job_steps where job_id = $1 order by position`,
      [id],
    )
  ).rows;
/** Time passes on the database's side until the job is due: its run_at moved to now. */
const due = (id: string) => t.admin.query(`update "${t.schema}".jobs set run_at = now() where id = $1`, [id]);
/** How many jobs of `kind` a claim at `now` would take (the claim is rolled back: nothing changes). */
async function claimableAt(kind: string, now: Date): Promise<number> {
  let n = -1;
  await t.db.db
    .transaction(async (tx) => {
      n = (
        await claimJobs(executorOf(tx), t.schema, {
          leases: [{ kind, leaseMs: 30_000 }],
          limit: 10,
          invocationId: 'probe',
          now,
        })
      ).jobs.length;
      throw new Error('roll back the probe');
    })
    .catch((err: Error) => {
      if (err.message !== 'roll back the probe') throw err;
    });
  return n;
}

function gate<T>() {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe('a step past its own timeoutMs', () => {
  it('is abandoned: its attempt fails and counts, the job is queued until its lease ends, and the retry runs the step again', async () => {
    const clock = new ManualClock();
    const runs = { collect: 0, exportFile: 0 };
    const entered = gate<void>();
    const hung = gate<string>();
    const kind = defineJob({
      kind: 'export',
      payload,
      backoff: instant,
      handler: async (_p, ctx) => {
        await ctx.step('collect', () => ++runs.collect);
        return ctx.step(
          'export-file',
          () => {
            runs.exportFile++;
            if (runs.exportFile > 1) return 'exported';
            entered.open();
            return hung.promise; // never settles on its own: the step hangs
          },
          { timeoutMs: 2_000, maxAttempts: 3, backoff: instant },
        );
      },
    });
    const id = await enqueue(kind);
    const invocation = worker([kind], clock).runInvocation({ remainingMs: 60_000 });
    await entered.promise;
    const held = await row(id);
    expect(held).toMatchObject({ state: 'running', attempt: 1 });
    const leaseEnd = held.lease_expires_at as Date;
    clock.advance(2_000);
    expect(await invocation).toMatchObject({ claimed: 1, retried: 1, completed: 0, dead: 0 });
    // The failed attempt is the step's (counted on it), not the job's: the claim's attempt is taken back.
    expect(await steps(id)).toEqual([
      { name: 'collect', type: 'run', state: 'completed', attempts: 1, result: 1, last_error: null },
      {
        name: 'export-file',
        type: 'run',
        state: 'failed',
        attempts: 1,
        result: null,
        last_error: expect.objectContaining({
          class: 'timeout',
          message: 'step "export-file" timed out after 2000 ms',
          step: 'export-file',
        }),
      },
    ]);
    const waiting = await row(id);
    expect(waiting).toMatchObject({ state: 'queued', attempt: 0, lease_expires_at: null });
    // It may still be running (abandoned, not stopped): its retry does not start before the lease ends,
    // though the step's backoff is 0.
    expect((waiting.run_at as Date).getTime()).toBe(leaseEnd.getTime());
    expect(waiting.last_error).toMatchObject({
      step: 'export-file',
      message: 'step "export-file" timed out after 2000 ms',
    });
    expect(await claimableAt('export', new Date(leaseEnd.getTime() - 1))).toBe(0);
    expect(await claimableAt('export', new Date(leaseEnd.getTime() + 1))).toBe(1);
    // The abandoned call finishing late writes nothing: the step stays failed, without a result.
    hung.open('too late');
    await new Promise((resolve) => setImmediate(resolve));
    expect((await steps(id))[1]).toMatchObject({ state: 'failed', result: null });

    await due(id);
    expect(await worker([kind], new ManualClock()).runInvocation({ remainingMs: 60_000 })).toMatchObject({
      completed: 1,
      retried: 0,
    });
    expect(runs).toEqual({ collect: 1, exportFile: 2 });
    expect(await job(id)).toMatchObject({ state: 'completed', result: 'exported', attempt: 1 });
    expect((await steps(id))[1]).toMatchObject({
      name: 'export-file',
      state: 'completed',
      attempts: 2,
      result: 'exported',
    });
  });

  it("retries on the step's own backoff and maxAttempts, not the kind's; spent, the job dies step_failed", async () => {
    const clock = new ManualClock();
    let calls = 0;
    const kind = defineJob({
      kind: 'upload',
      payload,
      maxAttempts: 10,
      backoff: instant,
      timeoutMs: 5_000,
      handler: async (_p, ctx) => {
        await ctx.step(
          'upload',
          () => {
            calls++;
            clock.advance(1_000); // this call takes the whole of its timeout
            return 'uploaded';
          },
          { timeoutMs: 1_000, maxAttempts: 2, backoff: { type: 'constant', delayMs: 3_600_000 } },
        );
      },
    });
    const id = await enqueue(kind);
    expect(await worker([kind], clock).runInvocation({ remainingMs: 60_000 })).toMatchObject({ retried: 1, dead: 0 });
    // The step's hour of backoff, later than the lease's end (minutes away) and than the kind's 0.
    const { rows } = await t.admin.query(
      `select state, attempt, run_at > now() + interval '59 minutes' and run_at < now() + interval '61 minutes' as in_an_hour
       from "${t.schema}".jobs where id = $1`,
      [id],
    );
    expect(rows[0]).toEqual({ state: 'queued', attempt: 0, in_an_hour: true });
    expect((await steps(id))[0]).toMatchObject({ state: 'failed', attempts: 1 });

    await due(id);
    expect(await worker([kind], clock).runInvocation({ remainingMs: 60_000 })).toMatchObject({ dead: 1, retried: 0 });
    expect(calls).toBe(2);
    const dead = await job(id);
    // Two step attempts, and still the job's first: its own 10 attempts were never used.
    expect(dead).toMatchObject({ state: 'dead', deadReason: 'step_failed', attempt: 1 });
    expect(dead.lastError?.message).toBe(
      'step "upload" failed 2 times (maxAttempts 2): step "upload" timed out after 1000 ms',
    );
    // Its history: the first timeout (a step's retry, named by its step), then the end (a StepError).
    expect(dead.errors.map((e) => [e.class, e.step ?? null, e.message])).toEqual([
      ['timeout', 'upload', 'step "upload" timed out after 1000 ms'],
      ['discard', null, dead.lastError?.message],
    ]);
    expect(await steps(id)).toEqual([
      {
        name: 'upload',
        type: 'run',
        state: 'failed',
        attempts: 2,
        result: null,
        last_error: expect.objectContaining({ class: 'timeout', message: 'step "upload" timed out after 1000 ms' }),
      },
    ]);
  });

  it("a step's timeoutMs replaces the kind's: a longer one is not cut at the kind's; without one, the kind's applies", async () => {
    const clock = new ManualClock();
    const kind = defineJob({
      kind: 'bounded',
      payload,
      timeoutMs: 1_000,
      handler: async (_p, ctx) => {
        // 3 s, under its own 5 s, though the kind's timeout is 1 s.
        const long = await ctx.step(
          'long',
          () => {
            clock.advance(3_000);
            return 'long done';
          },
          { timeoutMs: 5_000 },
        );
        // 1.5 s with no timeout of its own: past the kind's 1 s.
        await ctx.step(
          'plain',
          () => {
            clock.advance(1_500);
            return 'plain done';
          },
          { maxAttempts: 1 },
        );
        return long;
      },
    });
    const id = await enqueue(kind);
    expect(await worker([kind], clock).runInvocation({ remainingMs: 60_000 })).toMatchObject({
      dead: 1,
      completed: 0,
    });
    const dead = await job(id);
    expect(dead).toMatchObject({ deadReason: 'step_failed', attempt: 1 });
    expect(dead.lastError?.message).toBe(
      'step "plain" failed 1 times (maxAttempts 1): step "plain" timed out after 1000 ms',
    );
    expect(await steps(id)).toEqual([
      { name: 'long', type: 'run', state: 'completed', attempts: 1, result: 'long done', last_error: null },
      expect.objectContaining({ name: 'plain', state: 'failed', attempts: 1, result: null }),
    ]);
  });

  it('a transactional step is not cut off at its timeoutMs: its writes and result commit', async () => {
    await t.admin.query(`create table if not exists "${t.schema}".ledger (job_id bigint primary key)`);
    await t.admin.query(`truncate "${t.schema}".ledger`);
    const clock = new ManualClock();
    const kind = defineJob({
      kind: 'ledger',
      payload,
      timeoutMs: 10_000,
      handler: async (_p, ctx) =>
        ctx.step('book', { transaction: true, timeoutMs: 1_000 }, async (tx) => {
          clock.advance(3_000); // three times its timeoutMs
          await tx.execute(sql`insert into ${sql.identifier(t.schema)}.ledger (job_id) values (${ctx.id})`);
          return 'booked';
        }),
    });
    const id = await enqueue(kind);
    expect(await worker([kind], clock).runInvocation({ remainingMs: 60_000 })).toMatchObject({
      completed: 1,
      retried: 0,
    });
    expect(await job(id)).toMatchObject({ state: 'completed', result: 'booked', attempt: 1 });
    expect(await steps(id)).toEqual([
      { name: 'book', type: 'run', state: 'completed', attempts: 1, result: 'booked', last_error: null },
    ]);
    expect((await t.admin.query(`select job_id::text from "${t.schema}".ledger`)).rows).toEqual([{ job_id: id }]);
  });

  it("a step's timeoutMs is what must fit the invocation's time left: one that does not is handed to a fresh invocation, unstarted", async () => {
    const clock = new ManualClock();
    const runs: string[] = [];
    const kind = defineJob({
      kind: 'fits',
      payload,
      timeoutMs: 1_000,
      handler: async (_p, ctx) => {
        await ctx.step('warm-up', () => {
          runs.push('warm-up');
          clock.advance(500);
        });
        // 4.2 s would end past the 4.5 s this invocation has for attempts; the kind's 1 s would fit.
        await ctx.step('big', () => void runs.push('big'), { timeoutMs: 4_200 });
        return runs.length;
      },
    });
    const id = await enqueue(kind);
    const first = worker([kind], clock, { safetyMarginMs: 500 });
    expect(await first.runInvocation({ remainingMs: 5_000 })).toMatchObject({ suspended: 1, completed: 0, retried: 0 });
    expect(runs).toEqual(['warm-up']);
    expect(await row(id)).toMatchObject({ state: 'queued', attempt: 0, last_error: null });
    expect((await steps(id)).map((s) => s.name)).toEqual(['warm-up']);
    expect(await first.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 1 });
    expect(runs).toEqual(['warm-up', 'big']);
    expect(await job(id)).toMatchObject({ state: 'completed', result: 2, attempt: 1 });
  });
});

describe("the job's deadline bounds a job with steps between its invocations", () => {
  it('a job asleep when its deadline passes goes to the DLQ then (deadline_exceeded), before it wakes; its later steps never run', async () => {
    const clock = new ManualClock();
    const runs: string[] = [];
    const kind = defineJob({
      kind: 'nap-past-deadline',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('first', () => void runs.push('first'));
        await ctx.sleep('nap', 2 * 3_600_000);
        await ctx.step('after-nap', () => void runs.push('after-nap'));
      },
    });
    const deadline = at(3_600_000);
    const id = await enqueue(kind, {}, { deadline });
    expect(await worker([kind], clock).runInvocation({ remainingMs: 60_000 })).toMatchObject({ suspended: 1 });
    const asleep = await row(id);
    expect(asleep).toMatchObject({ state: 'queued', attempt: 0 });
    expect((asleep.run_at as Date).getTime()).toBeGreaterThan(deadline.getTime());
    const sweep = (now: Date) => buryDoomed(t.db.executor, t.schema, { kinds: [kind.kind], limit: 10, now });
    // Half an hour on: asleep, before the deadline — neither claimed nor buried.
    expect(await claimableAt(kind.kind, at(1_800_000))).toBe(0);
    expect(await sweep(at(1_800_000))).toEqual([]);
    // Just past the deadline, still an hour before it would wake: to the DLQ, not run.
    expect(await sweep(at(3_600_001))).toEqual([expect.objectContaining({ id, reason: 'deadline_exceeded' })]);
    const dead = await job(id);
    expect(dead).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded', attempt: 0 });
    expect(dead.lastError).toMatchObject({ class: 'deadline_exceeded' });
    expect(await claimableAt(kind.kind, at(3 * 3_600_000))).toBe(0);
    expect(runs).toEqual(['first']);
    // What it did before stays recorded (a replay would resume after it).
    expect((await steps(id)).map((s) => [s.name, s.type, s.state])).toEqual([
      ['first', 'run', 'completed'],
      ['nap', 'sleep', 'completed'],
    ]);
  });

  it('a job waiting for a signal when its deadline passes is buried by the next invocation; a signal after that wakes nothing', async () => {
    const clock = new ManualClock();
    const seen: unknown[] = [];
    const kind = defineJob({
      kind: 'approval-with-deadline',
      payload,
      handler: async (_p, ctx) => {
        seen.push(await ctx.waitForSignal('approved', { key: 'approve:42', timeoutMs: 86_400_000 }));
      },
    });
    const id = await enqueue(kind, {}, { deadline: at(3_600_000) });
    const w = worker([kind], clock);
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ suspended: 1 });
    expect(await row(id)).toMatchObject({ state: 'queued', attempt: 0 });
    // The hour passes on the database's side.
    await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 second' where id = $1`, [id]);
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ claimed: 0, dead: 1 });
    expect(await job(id)).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded', attempt: 0 });
    expect(await q.signal(t.db, 'approve:42', { ok: true })).toMatchObject({ woken: 0 });
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ claimed: 0, completed: 0 });
    expect(seen).toEqual([]);
    expect(await row(id)).toMatchObject({ state: 'dead', dead_reason: 'deadline_exceeded' });
  });

  it('a job handed to a fresh invocation (continuation) whose deadline passes before it runs again dies deadline_exceeded', async () => {
    const clock = new ManualClock();
    const ran: string[] = [];
    const kind = defineJob({
      kind: 'parts-with-deadline',
      payload,
      timeoutMs: 2_500,
      handler: async (_p, ctx) => {
        for (const part of ['a', 'b', 'c', 'd']) {
          await ctx.step(part, () => {
            ran.push(part);
            clock.advance(2_000);
          });
        }
      },
    });
    const id = await enqueue(kind, {}, { deadline: at(3_600_000) });
    const w = worker([kind], clock, { safetyMarginMs: 500 });
    // 4.5 s for attempts: two parts of 2 s, then the third would not fit.
    expect(await w.runInvocation({ remainingMs: 5_000 })).toMatchObject({ suspended: 1, completed: 0 });
    expect(ran).toEqual(['a', 'b']);
    expect(await row(id)).toMatchObject({ state: 'queued', attempt: 0 });
    await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 second' where id = $1`, [id]);
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ claimed: 0, dead: 1, completed: 0 });
    expect(ran).toEqual(['a', 'b']);
    expect(await job(id)).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded', attempt: 0 });
    expect((await steps(id)).map((s) => [s.name, s.state])).toEqual([
      ['a', 'completed'],
      ['b', 'completed'],
    ]);
  });

  it('a deadline that passes while the job runs does not cut its steps short; once the job leaves the invocation it is not run again', async () => {
    const clock = new ManualClock();
    const ran: string[] = [];
    const kind = defineJob({
      kind: 'deadline-mid-run',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('a', async () => {
          ran.push('a');
          // The deadline passes while this step runs (moved on the database's side).
          await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 second' where id = $1`, [
            ctx.id,
          ]);
        });
        await ctx.step('b', () => void ran.push('b'));
        await ctx.sleep('breather', 0); // due at once, but past its deadline: no claim takes it
        await ctx.step('c', () => void ran.push('c'));
      },
    });
    const id = await enqueue(kind, {}, { deadline: at(3_600_000) });
    const w = worker([kind], clock);
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ claimed: 1, suspended: 1, completed: 0 });
    expect(ran).toEqual(['a', 'b']);
    expect(await row(id)).toMatchObject({ state: 'queued', attempt: 0 });
    expect(await w.runInvocation({ remainingMs: 60_000 })).toMatchObject({ claimed: 0, dead: 1 });
    expect(ran).toEqual(['a', 'b']);
    expect(await job(id)).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded' });
    expect((await steps(id)).map((s) => [s.name, s.state])).toEqual([
      ['a', 'completed'],
      ['b', 'completed'],
      ['breather', 'completed'],
    ]);
  });

  it('a holder that overran its lease past the deadline: the job dies deadline_exceeded, and the late step is not recorded', async () => {
    const clock = new ManualClock();
    const entered = gate<void>();
    const hung = gate<string>();
    const kind = defineJob({
      kind: 'overrun',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('a', () => 'a done');
        await ctx.step('b', () => {
          entered.open();
          return hung.promise; // the holder stalls (a frozen or dying instance)
        });
      },
    });
    const id = await enqueue(kind, {}, { deadline: at(30_000) });
    const invocation = worker([kind], clock).runInvocation({ remainingMs: 600_000 });
    await entered.promise;
    const leaseEnd = ((await row(id)).lease_expires_at as Date).getTime();
    expect(leaseEnd).toBeGreaterThan(at(30_000).getTime());
    const sweep = (now: Date) => buryDoomed(t.db.executor, t.schema, { kinds: [kind.kind], limit: 10, now });
    // Past the deadline but under its lease: a running job is left alone.
    expect(await sweep(new Date(leaseEnd - 1_000))).toEqual([]);
    // Its lease ran out past the deadline: no rescue, the DLQ.
    expect(await sweep(new Date(leaseEnd + 1_000))).toEqual([
      expect.objectContaining({ id, reason: 'deadline_exceeded' }),
    ]);
    hung.open('b done, too late');
    expect(await invocation).toMatchObject({ leaseLost: 1, completed: 0 });
    expect(await job(id)).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded' });
    expect(await steps(id)).toEqual([
      { name: 'a', type: 'run', state: 'completed', attempts: 1, result: 'a done', last_error: null },
    ]);
  });
});
