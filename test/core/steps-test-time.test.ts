import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { getJob } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { defineSchedule } from '../../core/schedules.js';
import type { WorkerOptions } from '../../core/worker/index.js';
import { runJobs } from '../../testing/run-jobs.js';
import { TestTime } from '../../testing/time.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// runJobs({ time }): everything the worker judges by the clock — a job's back-off, its deadline, a
// continuation, a schedule's occurrences — is judged at the test's time, and that time never runs
// behind the database's clock. The step flow itself is tested on every driver (test/drivers/steps).
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-steps-test-time', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const SECOND = 1_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const payload = z.object({ n: z.number().default(0) });
const runAt = (time: TestTime, jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  runJobs({ db: t.db, schema: t.schema, jobs, logger: silentLogger, time, ...options });
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;

describe('running jobs at a test time', () => {
  it("a failed job's back-off is judged at the test time: retried a day later, not a second before", async () => {
    let calls = 0;
    const flaky = defineJob({
      kind: 'flaky',
      payload,
      backoff: { type: 'constant', delayMs: DAY },
      handler: () => {
        if (++calls === 1) throw new Error('partner down');
      },
    });
    const [queued] = await q.enqueueMany(t.db, [flaky.with({})]);
    const id = queued?.id as string;
    const time = new TestTime();
    expect(await runAt(time, [flaky])).toMatchObject({ claimed: 1, retried: 1 });
    const failedAt = time.now().getTime();
    expect((await job(id)).runAt).toEqual(new Date(failedAt + DAY));
    time.advance({ hours: 23, minutes: 59, seconds: 59 });
    expect(await runAt(time, [flaky])).toMatchObject({ claimed: 0 });
    time.advance({ seconds: 1 });
    expect(await runAt(time, [flaky])).toMatchObject({ claimed: 1, completed: 1 });
    expect(await job(id)).toMatchObject({ state: 'completed', attempt: 2, finishedAt: new Date(failedAt + DAY) });
  });

  it('a deadline passes at the test time: the job goes to the DLQ unrun, as deadline_exceeded', async () => {
    let calls = 0;
    const report = defineJob({ kind: 'report', payload, handler: () => void calls++ });
    const time = new TestTime();
    await time.catchUp(t.db);
    const [queued] = await q.enqueueMany(t.db, [
      report.with(
        {},
        { runAt: new Date(time.now().getTime() + HOUR), deadline: new Date(time.now().getTime() + 2 * HOUR) },
      ),
    ]);
    time.advance(3 * HOUR);
    expect(await runAt(time, [report])).toMatchObject({ claimed: 0, dead: 1 });
    expect(await job(queued?.id as string)).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded' });
    expect(calls).toBe(0);
  });

  it('a continuation and a sleep of 0 ms run on in the same runJobs: the time stands still, and they are due at it', async () => {
    const ran: string[] = [];
    const hops = defineJob({
      kind: 'hops',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('one', () => void ran.push('one'));
        await ctx.sleep('breath', 0);
        await ctx.step('two', () => void ran.push('two'));
      },
    });
    await q.enqueueMany(t.db, [hops.with({})]);
    const time = new TestTime();
    time.advance(30 * DAY); // far ahead of the database's clock
    const before = time.now();
    expect(await runAt(time, [hops])).toMatchObject({ claimed: 2, suspended: 1, completed: 1 });
    expect(ran).toEqual(['one', 'two']);
    expect(time.now()).toEqual(before);
  });

  it("never runs behind the database's clock: a job enqueued after a run, and one a signal woke, are due at the next", async () => {
    const ran: string[] = [];
    const note = defineJob({ kind: 'note', payload, handler: (p) => void ran.push(`note ${p.n}`) });
    const waiter = defineJob({
      kind: 'waiter',
      payload,
      handler: async (p, ctx) => {
        const got = await ctx.waitForSignal<string>('go', { key: `go:${p.n}`, timeoutMs: DAY });
        ran.push(got.timedOut ? 'timed out' : `got ${got.payload}`);
      },
    });
    // A start in the past: the first run catches up with the database's clock.
    const time = new TestTime(new Date('2020-01-01T00:00:00Z'));
    await q.enqueueMany(t.db, [waiter.with({ n: 1 })]);
    expect(await runAt(time, [note, waiter])).toMatchObject({ claimed: 1, suspended: 1 });
    expect(time.now().getTime()).toBeGreaterThan(Date.parse('2025-01-01T00:00:00Z'));
    // Both written at the database's clock, later than the run's time: the next run catches up.
    await q.enqueueMany(t.db, [note.with({ n: 2 })]);
    expect((await q.signal(t.db, 'go:1', 'now')).woken).toBe(1);
    expect(await runAt(time, [note, waiter])).toMatchObject({ claimed: 2, completed: 2 });
    expect(ran.sort()).toEqual(['got now', 'note 2']);
  });

  it("a schedule's occurrences are enqueued at the test time, one a day, and run in the same runJobs", async () => {
    const days: string[] = [];
    const digest = defineJob({
      kind: 'digest',
      payload: z.object({ day: z.string() }),
      handler: (p) => void days.push(p.day),
    });
    const schedules = [
      defineSchedule({
        name: 'daily-digest',
        cron: '0 3 * * *',
        job: digest,
        payload: (occurrence: Date) => ({ day: occurrence.toISOString().slice(0, 10) }),
      }),
    ];
    const time = new TestTime();
    await time.catchUp(t.db);
    // Start at midnight UTC (ahead of the database's clock): the first tick records the schedule.
    time.advanceTo(new Date(Math.ceil((time.now().getTime() + SECOND) / DAY) * DAY));
    const midnight = time.now().getTime();
    expect(await runAt(time, [digest], { schedules })).toMatchObject({ claimed: 0 });
    time.advance({ hours: 2, minutes: 59 });
    expect(await runAt(time, [digest], { schedules })).toMatchObject({ claimed: 0 });
    time.advance({ minutes: 1 });
    expect(await runAt(time, [digest], { schedules })).toMatchObject({ claimed: 1, completed: 1 });
    time.advance(DAY);
    expect(await runAt(time, [digest], { schedules })).toMatchObject({ claimed: 1, completed: 1 });
    const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
    expect(days).toEqual([day(midnight), day(midnight + DAY)]);
  });

  it('is refused with test.now beside it, and a test.now that returns no Date stops the invocation with a clear error', async () => {
    const noop = defineJob({ kind: 'noop', payload, handler: () => {} });
    await expect(runAt(new TestTime(), [noop], { test: { now: () => new Date() } })).rejects.toThrow(
      'runJobs: pass time or test.now, not both',
    );
    const result = await runJobs({
      db: t.db,
      schema: t.schema,
      jobs: [noop],
      logger: silentLogger,
      test: { now: () => new Date(Number.NaN) },
    });
    expect(result.invocations[0]).toMatchObject({
      stoppedBecause: 'error',
      error: 'test.now must return a valid Date',
    });
  });
});
