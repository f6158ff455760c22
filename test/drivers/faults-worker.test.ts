import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import type { FaultRule } from '../../testing/faults.js';
import { testDriver } from '../helpers/db.js';
import { type FaultyContext, useFaultySchema } from '../helpers/faulty.js';

// The worker when the network fails around its statements, on each driver: what committed is what
// the summary counts, a claim whose answer was lost costs no attempt, nothing runs twice.
let t: FaultyContext;
useFaultySchema('drivers-faults-worker', (ctx) => {
  t = ctx;
});

const ran: number[] = [];
/**
 * Arms a fault on the statement that carries the outcomes, once a job has run: every claim carries a
 * settle (empty in an invocation's first claim: one text), so the text alone names the claim before it too.
 */
let armOnRun: FaultRule | undefined;
const task = defineJob({
  kind: 'task',
  payload: z.object({ n: z.number() }),
  timeoutMs: 2_000,
  handler: (p) => {
    ran.push(p.n);
    if (armOnRun) t.faults.inject(armOnRun);
    armOnRun = undefined;
  },
});
const enqueueTasks = (n: number) =>
  createEnqueuer({ schema: t.schema }).enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => task.with({ n: i })),
  );
const run = (options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs: [task], logger: silentLogger, ...options }).runInvocation({
    remainingMs: 30_000,
  });
const rows = async () =>
  (await t.admin.query(`select state, attempt from "${t.schema}".jobs order by id`)).rows as {
    state: string;
    attempt: number;
  }[];

describe(`a worker invocation when the network fails (${testDriver()})`, () => {
  it("counts the jobs a settle completed although the settle's answer was lost", async () => {
    ran.length = 0;
    await enqueueTasks(3);
    // The settle rides with the next claim: lose that statement's answer once it committed.
    armOnRun = { mode: 'lose-answer', match: 'settle_input' };
    const summary = await run();
    expect(summary).toMatchObject({
      claimed: 3,
      completed: 3,
      leaseLost: 0,
      stoppedBecause: 'error',
      errorCode: 'outcome_unknown',
      answersLost: 1,
    });
    expect(await rows()).toEqual(Array.from({ length: 3 }, () => ({ state: 'completed', attempt: 1 })));
    expect(ran.sort()).toEqual([0, 1, 2]);
  });

  it('gives back, with no attempt counted, the jobs a claim took when its answer was lost', async () => {
    ran.length = 0;
    await enqueueTasks(3);
    t.faults.inject({ mode: 'lose-answer', match: 'claimed as (' });
    const lost = await run();
    expect(lost).toMatchObject({ claimed: 0, released: 3, stoppedBecause: 'error', answersLost: 1 });
    expect(ran).toEqual([]);
    expect(await rows()).toEqual(Array.from({ length: 3 }, () => ({ state: 'queued', attempt: 0 })));
    // Claimable at once, not after a lease expiry: the next invocation runs each once.
    expect(await run()).toMatchObject({ claimed: 3, completed: 3, stoppedBecause: 'drained' });
    expect(await rows()).toEqual(Array.from({ length: 3 }, () => ({ state: 'completed', attempt: 1 })));
    expect(ran.sort()).toEqual([0, 1, 2]);
  });

  it('a settle refused before it ran is sent again on the way out, and nothing is counted twice', async () => {
    ran.length = 0;
    await enqueueTasks(3);
    armOnRun = { mode: 'refuse', match: 'settle_input' };
    const summary = await run();
    expect(summary).toMatchObject({ claimed: 3, completed: 3, leaseLost: 0, stoppedBecause: 'error' });
    expect(await rows()).toEqual(Array.from({ length: 3 }, () => ({ state: 'completed', attempt: 1 })));
  });

  it('in delete mode, a completion whose answer was lost is counted from the row it removed', async () => {
    ran.length = 0;
    await enqueueTasks(2);
    armOnRun = { mode: 'lose-answer', match: 'settle_input' };
    const summary = await run({ completedJobs: 'delete' });
    expect(summary).toMatchObject({ claimed: 2, completed: 2, leaseLost: 0, answersLost: 1 });
    expect(await rows()).toEqual([]);
  });
});
