/**
 * Dev probe: Postgres time of the claim statement alone, with and without parts of the schema
 * (`node .bench/probe-claim.mjs "<sql run before>"`): one connection, 50,000 jobs in claims of
 * PROBE_BATCH (500).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { RAW_SCHEMA_CLAIM, RAW_SCHEMA_COMPLETE } from './systems/raw-schema.js';

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
const batch = Number(process.env.PROBE_BATCH ?? 500);
const rounds = Math.floor(50_000 / batch);
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
let settle: { id: string; leaseToken: string; outcome: 'completed' }[] = [];
const { Session } = await import('node:inspector/promises');
const session = new Session();
if (process.env.PROBE_PROF) {
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
}
const t0 = performance.now();
const cpu0 = process.cpuUsage();
if (process.env.RAW) {
  // The raw-schema floor's two statements (bench/systems/raw-schema.ts), for comparison.
  for (let i = 0; i < rounds; i++) {
    const token = randomUUID();
    const { rows } = await admin.query(RAW_SCHEMA_CLAIM, [batch, token, token]);
    await admin.query(RAW_SCHEMA_COMPLETE, [rows.map((r) => r.id), token]);
  }
} else {
  for (let i = 0; i < rounds; i++) {
    const claim = await claimJobs(db.executor, 'skiplock', { leases, limit: batch, invocationId: 'probe', settle });
    settle = claim.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' }));
  }
}
const ms = performance.now() - t0;
if (process.env.PROBE_PROF) {
  const { profile } = await session.post('Profiler.stop');
  (await import('node:fs')).writeFileSync(process.env.PROBE_PROF, JSON.stringify(profile));
}
const cpu = process.cpuUsage(cpu0);
console.log(
  `${((ms * 1000) / 50_000).toFixed(1)} µs per job (claim + completion), Node ${((cpu.user + cpu.system) / 50_000).toFixed(1)} µs, ${process.argv[2] ?? ''}`,
);
await admin.end();
await db.close();
