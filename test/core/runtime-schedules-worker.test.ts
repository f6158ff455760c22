import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createScheduler } from '../../core/runtime-schedules.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { captureStatements } from '../helpers/statements.js';

// A worker invocation ticks the schedules created at run time — of any kind — when its first
// statement says one is due, and an idle one reports the next run as its nextDueAt.
let t: TestContext;
useTestSchema('runtime-schedules-worker', (ctx) => {
  t = ctx;
});

const sent: string[] = [];
const digest = defineJob({
  kind: 'digest',
  timeoutMs: 2_000,
  payload: z.object({ userId: z.string() }),
  handler: (p) => void sent.push(p.userId),
});
const other = defineJob({ kind: 'other', timeoutMs: 2_000, payload: z.object({}), handler: () => {} });
const at = (iso: string) => new Date(iso);
const worker = (jobs: Parameters<typeof createWorker>[0]['jobs'], now: string, extra = {}) =>
  createWorker({
    db: t.db,
    schema: t.schema,
    jobs,
    logger: silentLogger,
    test: { now: () => at(now) },
    ...extra,
  });
const scheduler = () => createScheduler({ schema: t.schema });

describe('run-time schedules in a worker invocation', () => {
  it('an invocation enqueues the due occurrence and runs its job; the next one does not enqueue it again', async () => {
    await scheduler().createSchedule(
      t.db,
      { key: 'digest:user-42', job: digest, cron: '0 9 * * *', payload: { userId: 'u42' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    const first = await worker([digest], '2027-06-01T09:00:02Z').runInvocation({ remainingMs: 10_000 });
    expect(first).toMatchObject({ runtimeScheduled: 1, completed: 1 });
    expect(sent).toEqual(['u42']);
    const second = await worker([digest], '2027-06-01T09:00:30Z').runInvocation({ remainingMs: 10_000 });
    expect(second.runtimeScheduled).toBeUndefined();
    expect(second.claimed).toBe(0);
  });

  it('a worker that does not run the kind still ticks it: the job waits for a worker that does', async () => {
    await scheduler().createSchedule(
      t.db,
      { key: 'feed:1', job: digest, everyMs: 60_000, payload: { userId: 'f' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    const summary = await worker([other], '2027-06-01T08:01:01Z').runInvocation({ remainingMs: 10_000 });
    expect(summary).toMatchObject({ runtimeScheduled: 1, claimed: 0 });
    const { rows } = await t.admin.query(
      `select kind, state, dedupe_key from "${t.schema}".jobs where kind = 'digest'`,
    );
    expect(rows).toEqual([{ kind: 'digest', state: 'queued', dedupe_key: 'feed:1@2027-06-01T08:01:00.000Z' }]);
  });

  it('with nothing due, the run-time schedules cost an idle invocation no statement of its own', async () => {
    await scheduler().createSchedule(
      t.db,
      { key: 'later', job: digest, cron: '0 9 * * *', payload: { userId: 'x' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    const run = (runtimeSchedules: boolean) =>
      captureStatements(testDriver(), () =>
        worker([other], '2027-06-01T08:30:00Z', { runtimeSchedules }).runInvocation({ remainingMs: 10_000 }),
      );
    const on = await run(true);
    const off = await run(false);
    expect(on.texts.length).toBe(off.texts.length);
    expect(on.texts.some((text) => text.includes('runtime_schedules'))).toBe(true);
    expect(off.texts.some((text) => text.includes('runtime_schedules'))).toBe(false);
  });

  it("an idle invocation's nextDueAt is the earliest run-time schedule's next run", async () => {
    await scheduler().createSchedule(
      t.db,
      { key: 'soon', job: digest, cron: '0 9 * * *', payload: { userId: 's' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    await scheduler().createSchedule(
      t.db,
      { key: 'paused', job: digest, cron: '30 8 * * *', payload: { userId: 'p' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    await scheduler().pauseSchedule(t.db, 'paused');
    const summary = await worker([other], '2027-06-01T08:10:00Z', { nextDue: true }).runInvocation({
      remainingMs: 10_000,
    });
    expect(summary.stoppedBecause).toBe('drained');
    expect(summary.nextDueAt).toBe(at('2027-06-01T09:00:00Z').getTime());
  });
  it("a tick that failed after its claim holds the schedules no longer than its invocation's time", async () => {
    await scheduler().createSchedule(
      t.db,
      { key: 'digest:held', job: digest, everyMs: 60_000, payload: { userId: 'held' } },
      { now: at('2027-06-01T08:00:00Z') },
    );
    // The fire (it inserts the occurrence's job) fails after the tick's claim committed.
    await t.admin.query(
      `create function "${t.schema}".refuse_digest() returns trigger language plpgsql as $$
       begin raise exception 'refused for the test'; end $$;
       create trigger refuse_digest before insert on "${t.schema}".jobs for each row
       when (new.kind = 'digest') execute function "${t.schema}".refuse_digest()`,
    );
    const failed = await worker([other], '2027-06-01T08:01:01Z').runInvocation({ remainingMs: 5_000 });
    expect(failed.runtimeScheduled).toBeUndefined();
    await t.admin.query(`drop trigger refuse_digest on "${t.schema}".jobs`);
    // 6 s later that invocation is long over: the next one ticks the schedule, not 30 s later.
    const next = await worker([other], '2027-06-01T08:01:07Z').runInvocation({ remainingMs: 5_000 });
    expect(next.runtimeScheduled).toBe(1);
  });
});
