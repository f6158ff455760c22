import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';

const url = 'postgres://postgres@127.0.0.1:5432/test';
const schema = 'probe';
const admin = new pg.Pool({ connectionString: url });
await admin.query(`drop schema if exists ${schema} cascade`);
const db = connect({ connectionString: url });
await migrate(db, { schema });
const job = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: () => {} });
const N = Number(process.argv[2] ?? 50000),
  K = Number(process.argv[3] ?? 4),
  B = Number(process.argv[4] ?? 100);
const q = createEnqueuer({ schema });
let t = Date.now();
for (let i = 0; i < N; i += 1000)
  await q.enqueueMany(
    db,
    Array.from({ length: 1000 }, (_, j) => job.with({ n: i + j })),
  );
console.log('bulk enqueue', Math.round(N / ((Date.now() - t) / 1000)), 'jobs/s');
await admin.query(`vacuum analyze ${schema}.jobs`);
const lsn0 = (await admin.query('select pg_current_wal_lsn() as l')).rows[0].l;
t = Date.now();
await Promise.all(
  Array.from({ length: K }, async () => {
    const c = connect({ connectionString: url, max: 2 });
    const w = createWorker({ db: c, schema, jobs: [job], concurrency: B, batchSize: B, logger: silentLogger });
    while (true) {
      const s = await w.runInvocation({ remainingMs: 600000 });
      if (s.claimed === 0) break;
    }
    await c.close();
  }),
);
const secs = (Date.now() - t) / 1000;
const lsn1 = (await admin.query('select pg_current_wal_lsn() as l')).rows[0].l;
const wal = Number((await admin.query('select pg_wal_lsn_diff($1, $2) as d', [lsn1, lsn0])).rows[0].d);
console.log('process', Math.round(N / secs), 'jobs/s', 'wal/job (claim+complete)', Math.round(wal / N));
await db.close();
await admin.end();
