/**
 * Dev probe (issue 41): a fresh process's first invocations, as a cold Lambda's — Node CPU and wall
 * of each of the first N invocations of 500 no-op jobs (jobs inserted by plain SQL so that the
 * enqueue path does not warm the worker's code), on a fresh `bench_probe` database.
 * `node .bench/probe-first-run.mjs [N] [BATCH]` (8, 500), built as the other probes.
 */
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { freshDatabase } from './db.js';

const N = Number(process.argv[2] ?? 8);
const BATCH = Number(process.argv[3] ?? 500);
const url = await freshDatabase((await resolveTestDatabase()).url, 'bench_probe');
const setup = connect({ connectionString: url, max: 1 });
await migrate(setup);
await setup.close();
const admin = new pg.Client({ connectionString: url });
await admin.connect();
const job = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const db = connect({ connectionString: url, max: 1 });
const worker = createWorker({ db, jobs: [job], concurrency: BATCH, batchSize: BATCH, logger: silentLogger });
const out: string[] = [];
for (let i = 0; i < N; i++) {
  await admin.query(
    `insert into skiplock.jobs (kind, payload) select 'noop', jsonb_build_object('n', g) from generate_series(1, $1) g`,
    [BATCH],
  );
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const s = await worker.runInvocation({ remainingMs: 60_000 });
  const c = process.cpuUsage(c0);
  out.push(
    `${i}: ${s.completed} jobs, wall ${(performance.now() - t0).toFixed(1)} ms, node ${((c.user + c.system) / 1000).toFixed(1)} ms`,
  );
}
console.log(out.join('\n'));
await db.close();
await admin.end();
