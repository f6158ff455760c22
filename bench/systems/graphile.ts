import { Logger, makeWorkerUtils, run, type WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { waitUntilZero } from '../db.js';
import { type BenchSystem, type Flow, flowKey } from './types.js';

const silent = new Logger(() => () => {});

/**
 * graphile-worker 0.18 configured as its performance page recommends: a local queue that
 * fetches in batches, batched completion and failure, prepared statements.
 * Flow: ordering keys as named queues (`queueName`, one job at a time per queue). graphile-worker
 * has no limit above one per key, so it takes no `perKey` flow.
 */
export function graphileSystem(flow?: Flow & { mode: 'ordering' }): BenchSystem {
  let url = '';
  let utils: WorkerUtils | undefined;
  let utilsPool: pg.Pool | undefined;
  // Our own pools (with error handlers), so a dropped benchmark database cannot crash the run.
  const pool = (max: number) => {
    const p = new pg.Pool({ connectionString: url, max });
    p.on('error', () => {});
    p.on('connect', (client) => client.on('error', () => {}));
    return p;
  };
  const worker = { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };
  return {
    name: 'graphile-worker',
    settings: {
      ...(flow ? { queueName: `one of ${flow.keys}` } : {}),
      concurrency: 'K',
      maxPoolSize: 'K + 2',
      preset: { worker },
      preparedStatements: true,
      pollInterval: 2000,
    },
    async setup(target) {
      url = target;
      utilsPool = pool(4);
      utils = await makeWorkerUtils({ pgPool: utilsPool, logger: silent });
      await utils.migrate();
    },
    async enqueueSingle(n) {
      const queue = (j: number) => (flow ? { queueName: flowKey(flow, j) } : {});
      for (let i = 0; i < n; i++) await (utils as WorkerUtils).addJob('noop', { n: i }, queue(i));
    },
    async enqueueBulk(n, size) {
      for (let i = 0; i < n; i += size) {
        await (utils as WorkerUtils).addJobs(
          Array.from({ length: Math.min(size, n - i) }, (_, j) => ({
            identifier: 'noop',
            payload: { n: i + j },
            ...(flow ? { queueName: flowKey(flow, i + j) } : {}),
          })),
        );
      }
    },
    async process(k) {
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      const runnerPool = pool(k + 2);
      const runner = await run({
        pgPool: runnerPool,
        concurrency: k,
        noHandleSignals: true,
        pollInterval: 2000,
        logger: silent,
        taskList: { noop: async () => {} },
        preset: { worker },
      });
      await waitUntilZero(async () =>
        Number((await check.query('select count(*) as n from graphile_worker._private_jobs')).rows[0].n),
      );
      await runner.stop();
      await runnerPool.end();
      await check.end();
    },
    async teardown() {
      await utils?.release();
      await utilsPool?.end();
    },
  };
}
