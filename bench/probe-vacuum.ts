/**
 * `npx tsx bench/probe-vacuum.ts [churn] [keep|delete]`: what a claim costs after `churn` jobs went
 * through the table with no VACUUM, against the same claim after one. Every finished job leaves a
 * dead entry in the indexes its running row version was in; the question is whether the claim
 * reads them. The churn runs the worker's own statements (claim with the previous batch's
 * settle, two loops); the measured claims run with `now` ten minutes on, so every dead lease
 * entry lies in the rescue branch's range, as it does in production after the lease length.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import * as z from 'zod';
import type { Completion } from '../base/outcomes.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';

const churn = Number(process.argv[2] ?? 120_000);
const completion = (process.argv[3] ?? 'keep') as Completion;
const database = await resolveTestDatabase();
const schema = `probe_vacuum_${process.pid}`;
const admin = new pg.Pool({ connectionString: database.url, max: 2 });
const db = connect({ connectionString: database.url, max: 4 });
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const enqueuer = createEnqueuer({ schema });
const leases = [{ kind: 'noop', leaseMs: 60_000 }];

async function enqueue(n: number) {
  for (let i = 0; i < n; i += 1000)
    await enqueuer.enqueueMany(
      db,
      Array.from({ length: Math.min(1000, n - i) }, (_, j) => noop.with({ n: i + j })),
    );
}

/** Claims and completes until nothing is left: each claim carries the previous batch's completions. */
async function drain(batch: number, now?: Date): Promise<number[]> {
  const times: number[] = [];
  let settle: { id: string; leaseToken: string; outcome: 'completed' }[] = [];
  while (true) {
    const started = performance.now();
    const result = await claimJobs(db.executor, schema, {
      leases,
      limit: batch,
      invocationId: randomUUID(),
      settle,
      completion,
      ...(now ? { now } : {}),
    });
    times.push(performance.now() - started);
    settle = result.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
    if (result.jobs.length === 0) return times;
  }
}

async function leaseIndexReads(): Promise<number> {
  const { rows } = await admin.query(
    `select idx_tup_read::bigint as n from pg_stat_user_indexes where schemaname = $1 and indexrelname = 'jobs_lease_idx'`,
    [schema],
  );
  return Number(rows[0]?.n ?? 0);
}

async function measure(label: string) {
  await enqueue(2_000);
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const before = await leaseIndexReads();
  const times = await drain(10, new Date(Date.now() + 10 * 60_000));
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  const reads = (await leaseIndexReads()) - before;
  const sorted = [...times].sort((a, b) => a - b);
  const p50 = sorted[Math.floor(sorted.length / 2)] ?? 0;
  console.log(
    `${label}: ${times.length} claims, p50 ${p50.toFixed(2)} ms, p90 ${(sorted[Math.floor(sorted.length * 0.9)] ?? 0).toFixed(2)} ms, lease index entries read per claim ${Math.round(reads / times.length)}`,
  );
  return p50;
}

try {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await migrate(db, { schema });
  console.log(`${completion}: churning ${churn.toLocaleString('en')} jobs through the table without VACUUM`);
  const started = Date.now();
  for (let done = 0; done < churn; done += 20_000) {
    await enqueue(Math.min(20_000, churn - done));
    await Promise.all([drain(100), drain(100)]);
  }
  console.log(`  churn took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const unvacuumed = await measure('unvacuumed');
  await admin.query(`vacuum "${schema}".jobs`);
  const vacuumed = await measure('vacuumed  ');
  console.log(`ratio unvacuumed / vacuumed: ${(unvacuumed / vacuumed).toFixed(2)}`);
} finally {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await db.close();
  await admin.end();
  await database.stop();
}
