import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { waitUntilZero } from '../db.js';
import type { BenchSystem } from './types.js';

/** pg-boss 12.38: batch fetch with burstWhenBatchFull, batch completion (a batch handler). */
export function pgBossSystem(batchSize = 500): BenchSystem {
  let url = '';
  let boss: PgBoss | undefined;
  return {
    name: 'pg-boss',
    settings: {
      work: { localConcurrency: 'K', batchSize, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
      schedule: false,
      supervise: false,
    },
    async setup(target) {
      url = target;
      boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: 20 });
      boss.on('error', () => {});
      await boss.start();
      await boss.createQueue('noop');
    },
    async enqueueSingle(n) {
      for (let i = 0; i < n; i++) await (boss as PgBoss).send('noop', { n: i });
    },
    async enqueueBulk(n, size) {
      for (let i = 0; i < n; i += size) {
        await (boss as PgBoss).insert(
          'noop',
          Array.from({ length: Math.min(size, n - i) }, (_, j) => ({ data: { n: i + j } })),
        );
      }
    },
    async process(k) {
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      const b = boss as PgBoss;
      await b.work(
        'noop',
        { batchSize, localConcurrency: k, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 },
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
