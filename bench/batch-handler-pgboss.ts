/**
 * pg-boss beside skiplock in the `batch_handler` phase (bench/batch-handler.ts): the same jobs, the
 * same handlers, the same concurrency, with pg-boss's own batch handler — `work(name, { batchSize },
 * handler)` hands the handler an array of jobs. One job per call is `batchSize: 1`, its default; a
 * batch is `batchSize: 100` with `perJobResults`, so the handler answers for each job as a skiplock
 * batch handler does (pg-boss then settles the completed ones in one statement).
 *
 * Polling: a worker of pg-boss waits `pollingIntervalSeconds` (0.5 s at least) after a fetch unless a
 * burst trigger holds. `burstWhenBatchFull` is ignored at batchSize 1, so both modes also set
 * `burstWhenReadyExceeds`, which reads the queue's ready count from pg-boss's queue cache: each
 * measurement counts its queued jobs with `getQueueStats` and starts a fresh instance to work them,
 * whose cache then holds the count. Without it, one job per call would run at 2 jobs/s per worker.
 */

import pg from 'pg';
import { type Job, PgBoss } from 'pg-boss';
import { waitUntilZero } from './db.js';

/** The work options of both modes; only `batchSize` (and `perJobResults` with it) differs. */
export const PGBOSS_WORK = {
  pollingIntervalSeconds: 0.5,
  burstWhenBatchFull: true,
  burstWhenReadyExceeds: 1,
} as const;
/** The pool of each instance (pg-boss's default is 10; its workers and the completions share it). */
const POOL_MAX = 20;

export type PgBossHandler = (jobs: Job<{ n: number }>[]) => Promise<unknown>;

/** pg-boss's instance options for the phase: no cron, no supervisor, as in bench/systems/pgboss.ts. */
const instance = (url: string) => {
  const boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: POOL_MAX });
  boss.on('error', () => {});
  return boss;
};

/**
 * A measurer on `url`: each call queues `n` jobs in a queue of its own, then times a fresh pg-boss
 * instance working them with `concurrency` workers of `batchSize` from the first fetch to the last
 * completion. Resolves with jobs per second.
 */
export async function pgBossMeasurer(url: string, concurrency: number) {
  const setup = instance(url);
  await setup.start();
  let queues = 0;
  const check = new pg.Client({ connectionString: url });
  await check.connect();
  const measure = async (handler: PgBossHandler, batchSize: number, n: number): Promise<number> => {
    const name = `batch-${queues++}`;
    await setup.createQueue(name);
    for (let from = 0; from < n; from += 1_000) {
      const count = Math.min(1_000, n - from);
      await setup.insert(
        name,
        Array.from({ length: count }, (_, i) => ({ data: { n: from + i } })),
      );
    }
    const [stats] = await setup.getQueueStats(name);
    if (stats?.readyCount !== n) throw new Error(`batch_handler (pg-boss): ${stats?.readyCount} of ${n} jobs ready`);
    const worker = instance(url);
    await worker.start();
    try {
      const started = performance.now();
      await worker.work(
        name,
        { ...PGBOSS_WORK, localConcurrency: concurrency, batchSize, perJobResults: batchSize > 1 },
        handler as (jobs: Job<{ n: number }>[]) => Promise<never>,
      );
      const done = await waitUntilZero(
        async () =>
          Number(
            (await check.query(`select count(*) as n from pgboss.job where name = $1 and state < 'completed'`, [name]))
              .rows[0].n,
          ),
        10,
      );
      const { rows } = await check.query(
        `select count(*)::int as n from pgboss.job where name = $1 and state = 'completed'`,
        [name],
      );
      if (rows[0].n !== n) throw new Error(`batch_handler (pg-boss): ${rows[0].n} of ${n} jobs completed`);
      return Math.round(n / ((done - started) / 1000));
    } finally {
      await worker.stop({ graceful: false });
      await setup.deleteQueue(name);
    }
  };
  return {
    measure,
    close: async () => {
      await check.end();
      await setup.stop({ graceful: false });
    },
  };
}

/** The settings the figures were measured with, as the result records them. */
export const pgBossSettings = (concurrency: number, batchSize: number) => ({
  work: { localConcurrency: concurrency, ...PGBOSS_WORK },
  single: { batchSize: 1 },
  batch: { batchSize, perJobResults: true },
  max: POOL_MAX,
  schedule: false,
  supervise: false,
});
