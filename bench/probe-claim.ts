/**
 * Dev probe: Postgres time of the claim statement alone, with and without parts of the schema
 * (`node .bench/probe-claim.mjs "<sql run before>"`): one connection, 100 claims of 500.
 */
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const url = await freshDatabase(server, 'bench_probe_claim');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
const enqueuer = createEnqueuer();
for (let i = 0; i < 60_000; i += 1000) {
  await enqueuer.enqueueMany(
    db,
    Array.from({ length: 1000 }, (_, j) => noop.with({ n: i + j })),
  );
}
const admin = new pg.Client({ connectionString: url });
await admin.connect();
if (process.argv[2]) await admin.query(process.argv[2]);
await vacuumAnalyze(url);
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
let settle: { id: string; leaseToken: string; outcome: 'completed' }[] = [];
const t0 = performance.now();
for (let i = 0; i < 100; i++) {
  const claim = await claimJobs(db.db, 'skiplock', { leases, limit: 500, invocationId: 'probe', settle });
  settle = claim.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' }));
}
const ms = performance.now() - t0;
console.log(`${((ms * 1000) / 50_000).toFixed(1)} µs per job (claim + completion), ${process.argv[2] ?? ''}`);
await admin.end();
await db.close();
