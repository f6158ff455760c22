import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { pause } from '../../core/controls.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import type { DueWrite } from '../../core/nudge.js';
import { defineSchedule } from '../../core/schedules.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

// An idle invocation says when its worker next has something to do, so that a platform can wake it
// then instead of querying the database on every tick (the summary's nextDueAt).
let t: TestContext;
useTestSchema('core-next-due', (ctx) => {
  t = ctx;
});

const payload = z.object({ n: z.number() });
const report = defineJob({ kind: 'report', queue: 'reports', payload, timeoutMs: 5_000, handler: () => {} });
const other = defineJob({ kind: 'other-kind', queue: 'reports', payload, handler: () => {} });
const elsewhere = defineJob({ kind: 'elsewhere', queue: 'mail', payload, handler: () => {} });
const clock = useSuppliedClock();
const worker = (options: { nextDue?: boolean; schedules?: ReturnType<typeof defineSchedule>[]; now?: Date } = {}) => {
  const { now, ...rest } = options;
  return createWorker({
    db: t.db,
    schema: t.schema,
    jobs: [report],
    queues: ['reports'],
    logger: silentLogger,
    nextDue: true,
    ...(now ? { test: { now: () => now } } : {}),
    ...rest,
  });
};
const later = (hours: number) => new Date(Date.now() + hours * 3_600_000);

describe("an idle invocation's nextDueAt", () => {
  it('is null when nothing of its kinds waits, and absent when the worker does not ask', async () => {
    // A job of a kind it does not run, and one of its kind in a queue it does not serve, are not its work.
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      other.with({ n: 1 }, { runAt: later(1) }),
      report.with({ n: 2 }, { queue: 'mail', runAt: later(1) }),
      elsewhere.with({ n: 3 }, { runAt: later(1) }),
    ]);
    expect(await worker().runInvocation({ remainingMs: 10_000 })).toMatchObject({ claimed: 0, nextDueAt: null });
    expect(await worker({ nextDue: false }).runInvocation({ remainingMs: 10_000 })).not.toHaveProperty('nextDueAt');
  });

  it("is the earliest run_at of its queued jobs: a delayed job, a retry's back-off", async () => {
    const soon = later(10);
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      report.with({ n: 1 }, { runAt: later(20) }),
      report.with({ n: 2 }, { runAt: soon }),
    ]);
    const summary = await worker().runInvocation({ remainingMs: 10_000 });
    expect(summary.claimed).toBe(0);
    expect(summary.nextDueAt).toBe(soon.getTime());
  });

  it('is absent after an invocation that ran jobs: the platform keeps its usual tick', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 })]);
    const summary = await worker().runInvocation({ remainingMs: 10_000 });
    expect(summary.completed).toBe(1);
    expect(summary).not.toHaveProperty('nextDueAt');
  });

  it('is in the past when work is ready that it could not take (a paused queue): due at once', async () => {
    await pause(t.db, { queue: 'reports' }, { schema: t.schema, by: 'test' });
    const readyAt = clock.at(0);
    await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 }, { runAt: readyAt })]);
    const summary = await worker({ now: clock.at(30_000) }).runInvocation({ remainingMs: 10_000 });
    expect(summary.claimed).toBe(0);
    // Its run_at, half a minute before the invocation's now.
    expect(summary.nextDueAt).toBe(readyAt.getTime());
  });

  it("is a running job's lease when that is earliest: its invocation may die, and a claim rescues it then", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const blocking = defineJob({
      kind: 'report',
      queue: 'reports',
      payload,
      timeoutMs: 5_000,
      handler: async () => {
        started();
        await held;
      },
    });
    await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 }), report.with({ n: 2 }, { runAt: later(5) })]);
    const claimedAt = clock.at(0);
    const busy = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [blocking],
      logger: silentLogger,
      concurrency: 1,
      test: { now: () => claimedAt },
    });
    const first = busy.runInvocation({ remainingMs: 20_000 });
    await running;
    const idle = await worker({ now: clock.at(1_000) }).runInvocation({ remainingMs: 10_000 });
    release();
    expect((await first).completed).toBe(1);
    expect(idle.claimed).toBe(0);
    // The lease: the kind's timeout (5 s) plus the default grace (5 s) from the claim.
    expect(idle.nextDueAt).toBe(claimedAt.getTime() + 10_000);
  });

  it("is a schedule's next occurrence when that comes first", async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 }, { runAt: later(48) })]);
    const daily = defineSchedule({ name: 'daily-report', cron: '0 18 * * *', job: report, payload: { n: 0 } });
    const summary = await worker({ schedules: [daily] }).runInvocation({ remainingMs: 10_000 });
    const next = daily.next(new Date())?.getTime() as number;
    expect(next).toBeLessThan(later(48).getTime());
    // The tick ran just now: the next occurrence after it.
    expect(Math.abs((summary.nextDueAt as number) - next)).toBeLessThan(1);
  });
});

describe("the enqueuer's noteDue", () => {
  it('tells the nudger of every write, nudged or not, with when each job is due; a failing one loses nothing', async () => {
    const noted: DueWrite[][] = [];
    const nudged: string[][] = [];
    const nudger = {
      nudge: async (queues: Iterable<string>) => void nudged.push([...queues]),
      noteDue: async (due: readonly DueWrite[]) => {
        noted.push([...due]);
        throw new Error('the hint store is down');
      },
    };
    const { enqueueMany, signal } = createEnqueuer({ schema: t.schema, nudger });
    const at = later(3);
    // The enqueuer dates a delayMs from Date.now (it takes no test time): the test's time stands in.
    const now = new Date(Math.ceil(Date.now() / 1000) * 1000);
    const wallClock = vi.spyOn(Date, 'now').mockReturnValue(now.getTime());
    const results = await enqueueMany(t.db, [
      report.with({ n: 1 }),
      report.with({ n: 2 }, { runAt: at, nudge: true }),
      elsewhere.with({ n: 3 }, { delayMs: 60_000 }),
    ]).finally(() => wallClock.mockRestore());
    expect(results.map((r) => r.outcome)).toEqual(['inserted', 'inserted', 'inserted']);
    expect(noted).toHaveLength(1);
    expect(noted[0]?.map((d) => d.queue)).toEqual(['reports', 'reports', 'mail']);
    expect(noted[0]?.[0]?.at).toBeNull();
    expect(noted[0]?.[1]?.at).toEqual(at);
    expect(noted[0]?.[2]?.at).toEqual(new Date(now.getTime() + 60_000));
    expect(nudged).toEqual([['reports']]);
    // A signal nobody waits for wakes no queue: nothing to note.
    await signal(t.db, 'nobody-waits', {});
    expect(noted).toHaveLength(1);
  });
});
