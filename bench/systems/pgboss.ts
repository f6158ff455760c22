import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { waitUntilZero } from '../db.js';
import { type BenchSystem, type Flow, flowKey } from './types.js';

/**
 * pg-boss 12.38: batch fetch with burstWhenBatchFull, batch completion (a batch handler).
 * Flow: ordering keys as a `key_strict_fifo` queue with a singletonKey per job; a per-key limit
 * as a group per job with `groupConcurrency` (its limit across all nodes, tracked in the database).
 */
export function pgBossSystem(batchSize = 500, flow?: Flow): BenchSystem {
  let url = '';
  let boss: PgBoss | undefined;
  const keyed = (n: number) =>
    flow === undefined
      ? {}
      : flow.mode === 'ordering'
        ? { singletonKey: flowKey(flow, n) }
        : { group: { id: flowKey(flow, n) } };
  const groups = flow?.mode === 'perKey' ? { groupConcurrency: flow.perKey } : {};
  return {
    name: 'pg-boss',
    settings: {
      ...(flow?.mode === 'ordering' ? { policy: 'key_strict_fifo' } : {}),
      work: { localConcurrency: 'K', batchSize, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5, ...groups },
      schedule: false,
      supervise: false,
    },
    async setup(target) {
      url = target;
      boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: 20 });
      boss.on('error', () => {});
      await boss.start();
      await boss.createQueue('noop', flow?.mode === 'ordering' ? { policy: 'key_strict_fifo' } : {});
    },
    async enqueueSingle(n) {
      for (let i = 0; i < n; i++) await (boss as PgBoss).send('noop', { n: i }, keyed(i));
    },
    async enqueueBulk(n, size) {
      for (let i = 0; i < n; i += size) {
        await (boss as PgBoss).insert(
          'noop',
          Array.from({ length: Math.min(size, n - i) }, (_, j) => ({ data: { n: i + j }, ...keyed(i + j) })),
        );
      }
    },
    async process(k) {
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      const b = boss as PgBoss;
      await b.work(
        'noop',
        { batchSize, localConcurrency: k, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5, ...groups },
        async () => {},
      );
      await waitUntilZero(async () =>
        Number(
          (await check.query(`select count(*) as n from pgboss.job where name = 'noop' and state < 'completed'`))
            .rows[0].n,
        ),
      );
      await b.offWork('noop');
      await check.end();
    },
    async teardown() {
      // pg-boss 12's stop() resolves once its workers and pool are shut down (the `wait` option of
      // older versions is gone), so the next system starts on a quiet server.
      await boss?.stop({ graceful: false });
    },
  };
}
