import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, DiscardError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { runMaintenance } from '../../core/maintenance.js';
import { createWorker } from '../../core/worker/index.js';
import { claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { ManualClock } from '../../testing/clock.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('completed_delete', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const task = defineJob({
  kind: 'task',
  queue: 'work',
  payload: z.object({ n: z.number().int() }),
  maxAttempts: 3,
  backoff: { type: 'constant', delayMs: 60_000 },
  handler: (p) => {
    if (p.n === 100) throw new Error('try again later');
    if (p.n === 200) throw new DiscardError('bad input', { reason: 'validation_error' });
  },
});

const deleting = () =>
  createWorker({ db: t.db, schema: t.schema, jobs: [task], logger: silentLogger, completedJobs: 'delete' });

const rows = async () =>
  (await t.admin.query(`select id::text, state, dedupe_mode from "${t.schema}".jobs order by id`)).rows;
const counted = async () =>
  Number(
    (await t.admin.query(`select coalesce(sum(completed), 0)::int as n from "${t.schema}".completed_counts`)).rows[0].n,
  );

describe(`completedJobs: 'delete' (${testDriver()})`, () => {
  it('deletes completed rows, keeps retries, the DLQ and window-dedupe rows, and the stats still count every completion', async () => {
    const plain = await q.enqueueMany(
      t.db,
      Array.from({ length: 20 }, (_, n) => task.with({ n })),
    );
    const retry = await q.enqueue(t.db, task, { n: 100 });
    const dead = await q.enqueue(t.db, task, { n: 200 });
    const windowed = await q.enqueue(
      t.db,
      task,
      { n: 7 },
      { dedupe: { key: 'daily', mode: 'window', windowMs: 86_400_000 } },
    );

    const summary = await deleting().runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ claimed: 23, completed: 21, retried: 1, dead: 1, leaseLost: 0 });

    // Only the jobs that did not complete, and the one whose row holds its dedupe window, remain.
    expect(await rows()).toEqual([
      { id: retry.id, state: 'queued', dedupe_mode: null },
      { id: dead.id, state: 'dead', dedupe_mode: null },
      { id: windowed.id, state: 'completed', dedupe_mode: 'window' },
    ]);
    expect(plain.every((p) => p.id !== windowed.id)).toBe(true);
    expect(await counted()).toBe(20);

    // The window still holds: a second enqueue with the key in the same period is deduplicated.
    const again = await q.enqueue(
      t.db,
      task,
      { n: 8 },
      { dedupe: { key: 'daily', mode: 'window', windowMs: 86_400_000 } },
    );
    expect(again).toMatchObject({ id: windowed.id, outcome: 'deduplicated' });

    // The stats count deleted completions (to the minute) with the rows that remain.
    const activity = await t.admin.query(`select * from "${t.schema}".queue_activity(300) where kind = 'task'`);
    expect(activity.rows).toEqual([
      expect.objectContaining({ queue: 'work', completed: '21', dead: '1', cancelled: '0', error_rate: 1 / 22 }),
    ]);
    const stats = await t.admin.query(`select * from "${t.schema}".queue_stats where kind = 'task'`);
    expect(stats.rows[0]).toMatchObject({ completed_1h: '21', dead_1h: '1', dead: '1', retry_waiting: '1' });
  });

  it('is fenced like a kept completion: a stale holder deletes nothing, the new holder deletes its own', async () => {
    const job = await q.enqueue(t.db, task, { n: 1 });
    const leases = [{ kind: 'task', leaseMs: 30_000 }];
    const [old] = (await claimJobs(t.db.executor, t.schema, { leases, limit: 1, invocationId: 'old' })).jobs;
    const later = new Date(Date.now() + 60_000);
    const [fresh] = (await claimJobs(t.db.executor, t.schema, { leases, limit: 1, invocationId: 'new', now: later }))
      .jobs;
    expect(fresh?.id).toBe(job.id);

    const stale = await claimJobs(t.db.executor, t.schema, {
      leases,
      limit: 0,
      invocationId: 'old',
      completion: 'delete',
      settle: [{ id: job.id, leaseToken: old!.leaseToken, outcome: 'completed' }],
    });
    expect([...stale.settled.lost]).toEqual([job.id]);
    expect(await rows()).toEqual([{ id: job.id, state: 'running', dedupe_mode: null }]);
    expect(await counted()).toBe(0);

    const settled = await settleJobs(
      t.db.executor,
      t.schema,
      [{ id: job.id, leaseToken: fresh!.leaseToken, outcome: 'completed' }],
      undefined,
      'delete',
    );
    expect(settled.map((s) => [s.id, s.state])).toEqual([[job.id, 'completed']]);
    expect(await rows()).toEqual([]);
    expect(await counted()).toBe(1);
  });

  const txTask = defineJob({
    kind: 'tx-task',
    payload: z.object({ n: z.number().int() }),
    transactional: true,
    handler: async (p, ctx) => {
      await ctx.tx.execute(sql`insert into ${sql.identifier(t.schema)}.side_effects (n) values (${p.n})`);
    },
  });

  if (testDriver() === 'neon-http') {
    // neon-http sends each statement as its own HTTP request, so there is no transaction for the
    // handler's writes and the deletion to share: the worker refuses a transactional kind up front
    // rather than deleting the row apart from the handler's writes.
    it('refuses a transactional kind in delete mode, since neon-http has no interactive transactions, and leaves its job queued', async () => {
      expect(t.db.interactiveTransactions).toBe(false);
      const job = await q.enqueue(t.db, txTask, { n: 5 });
      const refused = (() => {
        try {
          createWorker({ db: t.db, schema: t.schema, jobs: [txTask], logger: silentLogger, completedJobs: 'delete' });
        } catch (error) {
          return error;
        }
      })();
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as ConfigError).message).toBe(
        'job kind tx-task is transactional, but the neon-http driver has no interactive transactions; use pg or neon-ws',
      );
      expect(await rows()).toEqual([{ id: job.id, state: 'queued', dedupe_mode: null }]);
      expect(await counted()).toBe(0);
    });
  } else {
    it('a transactional handler commits its writes with the deletion', async () => {
      expect(t.db.interactiveTransactions).toBe(true);
      await t.admin.query(`create table "${t.schema}".side_effects (n int)`);
      await q.enqueue(t.db, txTask, { n: 5 });
      const summary = await createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [txTask],
        logger: silentLogger,
        completedJobs: 'delete',
      }).runInvocation({ remainingMs: 60_000 });
      expect(summary).toMatchObject({ completed: 1 });
      expect(await rows()).toEqual([]);
      expect((await t.admin.query(`select n from "${t.schema}".side_effects`)).rows).toEqual([{ n: 5 }]);
      expect(await counted()).toBe(1);
    });
  }

  it('maintenance prunes completion counts past retention (at least an hour) and rolls finished minutes up', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(`insert into ${s}.completed_counts (minute, queue, kind, completed) values
      (date_trunc('minute', now() - interval '3 hours'), 'work', 'task', 5),
      (date_trunc('minute', now() - interval '30 minutes'), 'work', 'task', 7),
      (date_trunc('minute', now() - interval '30 minutes'), 'work', 'task', 3),
      (date_trunc('minute', now() - interval '30 minutes'), 'work', 'other', 1),
      (date_trunc('minute', now()), 'work', 'task', 2),
      (date_trunc('minute', now()), 'work', 'task', 4)`);
    await runMaintenance(t.db, { schema: t.schema, completedRetentionMs: 0, clock: new ManualClock() });
    const left = await t.admin.query(
      `select kind, completed::int, minute > now() - interval '5 minutes' as current from ${s}.completed_counts
       order by current, kind, completed`,
    );
    // The 3-hour-old count is gone; the finished minute is one row per kind; the current minute,
    // still being written, is left alone.
    expect(left.rows).toEqual([
      { kind: 'other', completed: 1, current: false },
      { kind: 'task', completed: 10, current: false },
      { kind: 'task', completed: 2, current: true },
      { kind: 'task', completed: 4, current: true },
    ]);
  });

  // 8 invocations at once, each on its own pool, drain 2,000 jobs per completion mode; none fails.
  const drainConcurrently = async (perInvocation: { concurrency: number; connections: number }) => {
    const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number().int() }), handler: async () => {} });
    for (const completedJobs of ['keep', 'delete'] as const) {
      await q.enqueueMany(
        t.db,
        Array.from({ length: 2_000 }, (_, n) => noop.with({ n })),
      );
      const conns = Array.from({ length: 8 }, () => openDb({ max: perInvocation.connections }));
      try {
        const summaries = await Promise.all(
          conns.map((db) =>
            createWorker({
              db,
              schema: t.schema,
              jobs: [noop],
              logger: silentLogger,
              concurrency: perInvocation.concurrency,
              completedJobs,
            }).runInvocation({ remainingMs: 60_000 }),
          ),
        );
        expect(summaries.filter((s) => s.stoppedBecause !== 'drained')).toEqual([]);
        expect(summaries.reduce((n, s) => n + s.completed, 0)).toBe(2_000);
      } finally {
        await Promise.all(conns.map((c) => c.close()));
      }
      const left = await t.admin.query(
        `select count(*) filter (where state in ('queued', 'running'))::int as live from "${t.schema}".jobs`,
      );
      expect(left.rows[0].live).toBe(0);
    }
  };

  it('8 concurrent invocations settling and claiming in one statement drain 4,000 jobs with no failed invocation, in both modes', async () => {
    // Each statement writes its outcomes before it locks anything to claim; the other order
    // deadlocked under concurrency (a claim's scan briefly locks rows other invocations hold).
    await drainConcurrently({ concurrency: 50, connections: 1 });
    expect(await counted()).toBe(2_000);
  });

  it('8 concurrent invocations whose batches of 200 settle on one connection while the next claim runs on another drain 4,000 jobs, in both modes', async () => {
    // Above 128 outcomes the settle is a statement of its own, run alongside the claim: a claim
    // never waits (SKIP LOCKED), so neither statement can wait on the other in a cycle.
    await drainConcurrently({ concurrency: 200, connections: 2 });
    expect(await counted()).toBe(2_000);
  });

  it('refuses an unknown completedJobs value', () => {
    expect(() =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [task],
        logger: silentLogger,
        completedJobs: 'archive' as 'keep',
      }),
    ).toThrow(/completedJobs must be 'keep' or 'delete'/);
  });
});
