import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getJob } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { runJobs } from '../../testing/run-jobs.js';
import { TestTime } from '../../testing/time.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';

// Durable steps through the driver under test: the step statements, the suspension, the signal's
// lock-then-write transaction (a batch on neon-http) and a transactional step where the driver has
// interactive transactions. The step semantics are tested once, in test/core/steps.test.ts.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('drivers-steps', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const payload = z.object({ user: z.string() });
const run = (jobs: WorkerOptions['jobs']) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger }).runInvocation({ remainingMs: 60_000 });
const job = async (id: string, now?: Date) =>
  (await getJob(t.db, id, { schema: t.schema, now })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;

describe(`durable steps (${testDriver()})`, () => {
  it('steps, a sleep and a wait for a signal: each step once, the signal sent through this driver', async () => {
    const ran: string[] = [];
    const onboarding = defineJob({
      kind: 'onboarding',
      payload,
      handler: async (p, ctx) => {
        const mail = await ctx.step('welcome', () => {
          ran.push('welcome');
          return { messageId: `m-${p.user}` };
        });
        await ctx.sleepUntil('settle-in', new Date(Date.now() - 1_000));
        const activated = await ctx.waitForSignal<{ plan: string }>('activated', {
          key: `activate:${p.user}`,
          timeoutMs: 3_600_000,
        });
        return { mail, plan: activated.timedOut ? null : activated.payload.plan };
      },
    });
    const [queued] = await q.enqueueMany(t.db, [onboarding.with({ user: 'ada' })]);
    const id = queued?.id as string;
    // The sleep is over at once, the wait is not: two suspensions, no completion yet.
    expect(await run([onboarding])).toMatchObject({ suspended: 2, completed: 0 });
    if (testDriver() === 'neon-http') {
      const db = t.db.db as unknown as NeonHttpDatabase;
      const prepared = q.prepareSignal('activate:ada', { plan: 'pro' });
      const results = await db.batch(prepared.statements.map((s) => db.execute(s)) as [never, ...never[]]);
      expect(prepared.read(results)).toMatchObject({ woken: 1 });
    } else {
      expect(await q.signal(t.db, 'activate:ada', { plan: 'pro' })).toMatchObject({ woken: 1 });
    }
    expect(await run([onboarding])).toMatchObject({ completed: 1 });
    expect(await job(id)).toMatchObject({
      state: 'completed',
      attempt: 1,
      result: { mail: { messageId: 'm-ada' }, plan: 'pro' },
    });
    expect(ran).toEqual(['welcome']);
  });

  it("a week-long flow stepped through at a test time: the 7-day sleep, a step's back-off and the 2-day wait's timeout each end when due, not a second before", async () => {
    const SECOND = 1_000;
    const HOUR = 3_600_000;
    const DAY = 86_400_000;
    const ran: string[] = [];
    const checkIns = new Map<string, number>();
    const flow = defineJob({
      kind: 'week-flow',
      payload,
      handler: async (p, ctx) => {
        await ctx.step('welcome', () => void ran.push(`${p.user} welcome`));
        await ctx.sleep('a-week', 7 * DAY);
        // Fails on its first call: its retry waits an hour of the test's time.
        await ctx.step(
          'check-in',
          () => {
            const calls = (checkIns.get(p.user) ?? 0) + 1;
            checkIns.set(p.user, calls);
            if (calls === 1) throw new Error('mail server busy');
            ran.push(`${p.user} check-in`);
          },
          { backoff: { type: 'constant', delayMs: HOUR } },
        );
        const reply = await ctx.waitForSignal<{ rating: number }>('reply', {
          key: `reply:${p.user}`,
          timeoutMs: 2 * DAY,
        });
        if (reply.timedOut) await ctx.step('reminder', () => void ran.push(`${p.user} reminder`));
        else await ctx.step('thanks', () => void ran.push(`${p.user} thanks ${reply.payload.rating}`));
      },
    });
    const [ada, bo] = (await q.enqueueMany(t.db, [flow.with({ user: 'ada' }), flow.with({ user: 'bo' })])).map(
      (r) => r.id,
    ) as [string, string];
    const time = new TestTime();
    const runAtTestTime = () => runJobs({ db: t.db, schema: t.schema, jobs: [flow], logger: silentLogger, time });
    const stepsOf = async (id: string) =>
      Object.fromEntries((await job(id, time.now())).steps?.map((s) => [s.name, s]) ?? []);
    const at = (ms: number) => new Date(t0 + ms);

    // Day 0: the welcome, then both asleep for a week (the run caught up with the database's clock).
    expect(await runAtTestTime()).toMatchObject({ claimed: 2, suspended: 2, completed: 0 });
    const t0 = time.now().getTime();
    expect(ran.sort()).toEqual(['ada welcome', 'bo welcome']);
    expect((await stepsOf(ada))['a-week']).toMatchObject({ state: 'sleeping', wakeAt: at(7 * DAY), finishedAt: null });

    // A second before the week is over: nothing runs.
    time.advanceTo(at(7 * DAY - SECOND));
    expect(await runAtTestTime()).toMatchObject({ claimed: 0 });
    expect((await stepsOf(ada))['a-week']).toMatchObject({ state: 'sleeping' });
    // The week is over: the check-in fails once each, and retries an hour later, not before.
    time.advance(SECOND);
    expect(await runAtTestTime()).toMatchObject({ claimed: 2, retried: 2 });
    expect((await stepsOf(ada))['a-week']).toMatchObject({ state: 'completed', finishedAt: at(7 * DAY) });
    expect((await job(ada)).runAt).toEqual(at(7 * DAY + HOUR));
    time.advance(HOUR - SECOND);
    expect(await runAtTestTime()).toMatchObject({ claimed: 0 });
    time.advance(SECOND);
    expect(await runAtTestTime()).toMatchObject({ claimed: 2, suspended: 2 });
    expect(ran.slice(2).sort()).toEqual(['ada check-in', 'bo check-in']);
    const replyBy = at(7 * DAY + HOUR + 2 * DAY);
    expect(await stepsOf(ada)).toMatchObject({
      'check-in': { state: 'completed', attempts: 2, finishedAt: at(7 * DAY + HOUR) },
      reply: { state: 'waiting', signalKey: 'reply:ada', timeoutAt: replyBy },
    });

    // A day later bo replies (sent at the database's clock, which wakes bo at once); ada does not.
    time.advance(DAY);
    expect(await q.signal(t.db, 'reply:bo', { rating: 5 })).toMatchObject({ woken: 1 });
    expect(await runAtTestTime()).toMatchObject({ claimed: 1, completed: 1 });
    expect(ran.slice(4)).toEqual(['bo thanks 5']);
    // Ada's wait times out at day 9 + 1 hour, not a second before.
    time.advanceTo(new Date(replyBy.getTime() - SECOND));
    expect(await runAtTestTime()).toMatchObject({ claimed: 0 });
    time.advance(SECOND);
    expect(await runAtTestTime()).toMatchObject({ claimed: 1, completed: 1 });
    expect(ran.slice(5)).toEqual(['ada reminder']);
    expect(await stepsOf(ada)).toMatchObject({
      reply: { state: 'completed', finishedAt: replyBy },
      reminder: { state: 'completed', finishedAt: replyBy },
    });
    expect(await job(ada)).toMatchObject({ state: 'completed', attempt: 1, finishedAt: replyBy });
    expect(await job(bo)).toMatchObject({ state: 'completed', attempt: 1, finishedAt: at(8 * DAY + HOUR) });
  });

  it(
    testDriver() === 'neon-http'
      ? 'a transactional step is refused with step_unsupported: neon-http has no interactive transactions'
      : "a transactional step's write and its stored result commit together",
    async () => {
      await t.admin.query(`create table if not exists "${t.schema}".receipts (user_name text primary key)`);
      await t.admin.query(`truncate "${t.schema}".receipts`);
      const receipt = defineJob({
        kind: 'receipt',
        payload,
        handler: async (p, ctx) =>
          ctx.step('write', { transaction: true }, async (tx) => {
            await tx.execute(sql`insert into ${sql.identifier(t.schema)}.receipts values (${p.user})`);
            return 'written';
          }),
      });
      const [queued] = await q.enqueueMany(t.db, [receipt.with({ user: 'bo' })]);
      await run([receipt]);
      const count = (await t.admin.query(`select count(*)::int as n from "${t.schema}".receipts`)).rows[0].n;
      if (testDriver() === 'neon-http') {
        expect(await job(queued?.id as string)).toMatchObject({ state: 'dead', deadReason: 'step_unsupported' });
        expect(count).toBe(0);
      } else {
        expect(await job(queued?.id as string)).toMatchObject({ state: 'completed', result: 'written' });
        expect(count).toBe(1);
      }
    },
  );
  it('a job of 20 steps sends one statement per step and one read of its steps, which also extends its lease', async () => {
    const twenty = defineJob({
      kind: 'twenty',
      payload,
      handler: async (_p, ctx) => {
        for (let i = 0; i < 20; i++) await ctx.step(`s${i}`, () => i);
      },
    });
    await q.enqueueMany(t.db, [twenty.with({ user: 'x' })]);
    const { result, texts } = await captureStatements(testDriver(), () => run([twenty]));
    expect(result).toMatchObject({ completed: 1 });
    const writes = texts.filter((q) => /insert into .*job_steps/is.test(q));
    const reads = texts.filter((q) => /left join .*job_steps/is.test(q));
    const extensions = texts.filter((q) => /lease_expires_at = greatest/i.test(q) && !/job_steps/i.test(q));
    expect([writes.length, reads.length, extensions.length]).toEqual([20, 1, 0]);
  });
});
