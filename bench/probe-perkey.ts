/**
 * Dev probe for the flow phase's per-key case (issue 41): JOBS jobs over KEYS keys, keyConcurrency
 * PER_KEY, the batches of HOLDERS claimers running (their jobs held), then the steady-state claim:
 * one holder settles its batch and claims the next in one statement.
 * `npx tsx bench/probe-perkey.ts [explain|drain]`:
 * - explain: EXPLAIN (ANALYZE, BUFFERS) of that claim, and the jobs it took;
 * - drain: one claimer settles and claims until the queue is empty (HOLDERS - 1 batches stay held,
 *   re-settled and re-claimed in turn): jobs per claim and ms per claim, statement by statement.
 * PROBE_JOBS (50,000), PROBE_KEYS (1,000), PROBE_PER_KEY (5), PROBE_BATCH (500), PROBE_HOLDERS (4).
 */

import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import * as z from 'zod';
import type { Outcome } from '../base/outcomes.js';
import type { ClaimedJob } from '../base/rows.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob, defineQueue } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { renderSql } from '../db/render.js';
import { claimJobs, claimStatement } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const mode = process.argv[2] ?? 'explain';
const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const JOBS = env('PROBE_JOBS', 50_000);
const KEYS = env('PROBE_KEYS', 1_000);
const PER_KEY = env('PROBE_PER_KEY', 5);
const BATCH = env('PROBE_BATCH', 500);
const HOLDERS = env('PROBE_HOLDERS', 4);
const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const job = defineJob({
  kind: 'noop',
  queue: defineQueue({ name: 'bench', keyConcurrency: PER_KEY }),
  payload: z.object({ n: z.number() }),
  handler: async () => {},
});
const url = await freshDatabase(server, 'bench_probe_perkey');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
const enq = createEnqueuer();
for (let i = 0; i < JOBS; i += 1000) {
  await enq.enqueueMany(
    db,
    Array.from({ length: Math.min(1000, JOBS - i) }, (_, j) =>
      job.with({ n: i + j }, KEYS > 0 ? { concurrencyKey: `k${(i + j) % KEYS}` } : {}),
    ),
  );
}
await vacuumAnalyze(url);
const leases = [{ kind: 'noop', leaseMs: 600_000 }];
// PROBE_KEYS=0: no keys and no limit, the plain claim (the baseline).
const limits = KEYS > 0 ? [{ scope: 'key' as const, name: 'bench', maxRunning: PER_KEY }] : [];
const claim = (settle: readonly Outcome[]) =>
  claimJobs(db.executor, 'skiplock', {
    leases,
    limit: BATCH,
    invocationId: 'probe',
    limits,
    settle,
    limited: KEYS > 0,
  });
const done = (jobs: readonly ClaimedJob[]): Outcome[] =>
  jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));

const held: ClaimedJob[][] = [];
for (let h = 0; h < HOLDERS; h++) held.push((await claim([])).jobs);
console.log('held batches', held.map((b) => b.length).join(' '));

if (mode === 'explain') {
  // Rendered, not sent through the worker: EXPLAIN ANALYZE runs it in a transaction rolled back.
  const statement = claimStatement(
    'skiplock',
    { leases, limit: BATCH, invocationId: 'probe', limits, settle: done(held[0] ?? []), limited: true },
    'limited',
    randomUUID(),
  );
  const { sql: text, params } = renderSql(statement);
  if (process.env.PROBE_DUMP) writeFileSync(process.env.PROBE_DUMP, JSON.stringify({ text, params }));
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  for (let rep = 0; rep < 3; rep++) {
    await c.query('begin');
    const t = performance.now();
    const plan = await c.query(`explain (analyze, buffers) ${text}`, params);
    const ms = performance.now() - t;
    await c.query('rollback');
    if (rep === 2 || process.env.PROBE_ALL)
      console.log(plan.rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n'));
    console.log(`explain analyze ${rep}: ${ms.toFixed(1)} ms`);
  }
  await c.query('begin');
  const got = await c.query(text, params);
  await c.query('rollback');
  console.log('this claim takes', (got.rows[0].jobs ?? []).length);
  // Statement time without EXPLAIN's instrumentation: the median of 9 runs, each rolled back.
  const runs: number[] = [];
  for (let rep = 0; rep < 9; rep++) {
    await c.query('begin');
    const t = performance.now();
    await c.query(text, params);
    runs.push(performance.now() - t);
    await c.query('rollback');
  }
  runs.sort((a, b) => a - b);
  console.log(`statement: median ${runs[4]?.toFixed(1)} ms, min ${runs[0]?.toFixed(1)} ms`);
  await c.end();
} else {
  let claims = 0;
  let taken = 0;
  let ms = 0;
  const sizes: number[] = [];
  let turn = 0;
  while (true) {
    const t = performance.now();
    const r = await claim(done(held[turn] ?? []));
    ms += performance.now() - t;
    claims++;
    taken += r.jobs.length;
    sizes.push(r.jobs.length);
    held[turn] = r.jobs;
    turn = (turn + 1) % HOLDERS;
    if (held.every((b) => b.length === 0)) break;
  }
  const sorted = [...sizes].sort((a, b) => a - b);
  console.log(
    `claims ${claims}, jobs ${taken}, jobs/claim ${(taken / claims).toFixed(1)} (median ${sorted[Math.floor(sorted.length / 2)]}, min ${sorted[0]}), ms/claim ${(ms / claims).toFixed(2)}, µs/job ${((ms * 1000) / taken).toFixed(1)}`,
  );
}
await db.close();
