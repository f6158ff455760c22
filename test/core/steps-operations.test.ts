import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cancel, getJob, stats } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { runMaintenance } from '../../core/maintenance.js';
import { replay } from '../../core/replay.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// Operating jobs that use durable steps: what getJob shows of them, replaying a dead one from its
// failed step, from a named step or from the start, cancelling one that sleeps or waits, the stats'
// counts of sleeping and waiting jobs, and maintenance pruning the steps of deleted jobs.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-steps-operations', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const payload = z.object({ n: z.number().default(0) });
const run = (jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, ...options }).runInvocation({
    remainingMs: 60_000,
  });
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;

/** A three-step job whose `charge` step fails while `failing` is set; counts each step's runs. */
function pipeline() {
  const runs = { collect: 0, charge: 0, notify: 0 };
  const state = { failing: true };
  const kind = defineJob({
    kind: 'pipeline',
    payload,
    handler: async (_p, ctx) => {
      const rows = await ctx.step('collect', () => {
        runs.collect++;
        return 3;
      });
      await ctx.step(
        'charge',
        () => {
          runs.charge++;
          if (state.failing) throw new Error('card declined');
          return rows * 10;
        },
        { maxAttempts: 1 },
      );
      await ctx.step('notify', () => {
        runs.notify++;
      });
    },
  });
  return { kind, runs, state };
}

describe('operating durable steps', () => {
  it('getJob lists the steps: name, type, state, attempts, duration, result size, last error', async () => {
    const { kind } = pipeline();
    const [queued] = await q.enqueueMany(t.db, [kind.with({})]);
    expect(await run([kind])).toMatchObject({ dead: 1 });
    const dead = await job(queued?.id as string);
    expect(dead.deadReason).toBe('step_failed');
    expect(dead.steps).toEqual([
      expect.objectContaining({
        name: 'collect',
        position: 0,
        type: 'run',
        state: 'completed',
        attempts: 1,
        resultBytes: 1,
        lastError: null,
      }),
      expect.objectContaining({
        name: 'charge',
        position: 1,
        state: 'failed',
        attempts: 1,
        resultBytes: null,
        lastError: expect.objectContaining({ message: 'card declined', step: 'charge' }),
      }),
    ]);
    expect(dead.steps?.[0]?.finishedAt).toBeInstanceOf(Date);
  });

  it('a replay resumes at the failed step; fromStep reruns from a named one; restart from the beginning', async () => {
    for (const [options, expected] of [
      // Resume: collect keeps its result (not run again); charge, out of attempts, gets them back.
      [{}, { collect: 1, charge: 2, notify: 1 }],
      [{ fromStep: 'charge' }, { collect: 1, charge: 2, notify: 1 }],
      [{ fromStep: 'collect' }, { collect: 2, charge: 2, notify: 1 }],
      [{ restart: true }, { collect: 2, charge: 2, notify: 1 }],
    ] as const) {
      const { kind, runs, state } = pipeline();
      const [queued] = await q.enqueueMany(t.db, [kind.with({})]);
      const id = queued?.id as string;
      expect(await run([kind])).toMatchObject({ dead: 1 });
      state.failing = false;
      expect((await replay(t.db, { ids: [id], schema: t.schema, ...options })).replayed).toHaveLength(1);
      expect(await run([kind])).toMatchObject({ completed: 1 });
      expect({ options, runs }).toEqual({ options, runs: expected });
      expect((await job(id)).steps?.map((s) => [s.name, s.state])).toEqual([
        ['collect', 'completed'],
        ['charge', 'completed'],
        ['notify', 'completed'],
      ]);
    }
    await expect(replay(t.db, { ids: ['1'], schema: t.schema, restart: true, fromStep: 'x' })).rejects.toThrow(
      'give restart or fromStep, not both',
    );
  });

  it('a sleeping or waiting job can be cancelled; the stats count sleeping and waiting jobs', async () => {
    const sleeper = defineJob({
      kind: 'sleeper',
      payload,
      handler: async (_p, ctx) => {
        await ctx.sleep('nap', 3_600_000);
      },
    });
    const waiter = defineJob({
      kind: 'waiter',
      payload,
      handler: async (p, ctx) => {
        await ctx.waitForSignal('go', { key: `go:${p.n}`, timeoutMs: 3_600_000 });
      },
    });
    const queued = await q.enqueueMany(t.db, [sleeper.with({ n: 1 }), sleeper.with({ n: 2 }), waiter.with({ n: 3 })]);
    expect(await run([sleeper, waiter])).toMatchObject({ suspended: 3 });
    const byKind = Object.fromEntries((await stats(t.db, { schema: t.schema })).map((r) => [r.kind, r]));
    expect(byKind.sleeper).toMatchObject({ sleeping: 2, waitingForSignal: 0, scheduled: 2, running: 0 });
    expect(byKind.waiter).toMatchObject({ sleeping: 0, waitingForSignal: 1, scheduled: 1 });
    const outcomes = await cancel(t.db, [queued[0]?.id as string, queued[2]?.id as string], { schema: t.schema });
    expect(outcomes.map((o) => o.cancelled)).toEqual([true, true]);
    // A signal for the cancelled wait wakes nothing.
    expect(await q.signal(t.db, 'go:3', {})).toMatchObject({ woken: 0 });
    const after = Object.fromEntries((await stats(t.db, { schema: t.schema })).map((r) => [r.kind, r]));
    expect(after.sleeper).toMatchObject({ sleeping: 1 });
    expect(after.waiter?.waitingForSignal ?? 0).toBe(0);
  });

  it('maintenance prunes the steps of jobs deleted on completion and of pruned jobs, and taken signals', async () => {
    const stepped = defineJob({
      kind: 'stepped',
      payload,
      handler: async (p, ctx) => {
        await ctx.step('one', () => p.n);
        await ctx.step('two', () => p.n);
      },
    });
    await q.enqueueMany(t.db, [stepped.with({ n: 1 }), stepped.with({ n: 2 })]);
    expect(await run([stepped], { completedJobs: 'delete' })).toMatchObject({ completed: 2 });
    const [kept] = await q.enqueueMany(t.db, [stepped.with({ n: 3 })]);
    await run([stepped]);
    const count = async () => (await t.admin.query(`select count(*)::int as n from "${t.schema}".job_steps`)).rows[0].n;
    expect(await count()).toBe(6);
    await q.signal(t.db, 'nobody-waits', 1);
    const report = await runMaintenance(t.db, { schema: t.schema });
    expect(report.prunedSteps).toBe(4); // the deleted jobs' steps; the kept job's stay
    expect(await count()).toBe(2);
    expect(report.prunedSignals).toBe(0); // untaken, and younger than the DLQ's retention
    const pruned = await runMaintenance(t.db, { schema: t.schema, completedRetentionMs: 0 });
    expect(pruned.prunedCompleted).toBe(1);
    expect(await count()).toBe(0);
    expect((await getJob(t.db, kept?.id as string, { schema: t.schema })) === null).toBe(true);
  });
});
