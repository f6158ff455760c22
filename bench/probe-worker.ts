/**
 * Dev probe: the worker's own Node CPU per job, without a database (`node .bench/probe-worker.mjs
 * N BATCH [K]`): K invocation loops against an executor that answers each claim from memory with
 * BATCH no-op jobs (its JSON column parsed with JSON.parse, as node-postgres parses it) until N have
 * been claimed. What it prints is the worker's share of bench/probe.ts's Node time per job: the
 * claim's render and parameters, the loop's bookkeeping, the payload check, the handler's promise,
 * the outcome buffer. PROBE_PROF=<file>: a V8 CPU profile of it.
 */
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import type { SkiplockConnection } from '../db/connection-options.js';
import type { Executor } from '../db/executor.js';
import { renderSql } from '../db/render.js';
import { startCpuProfile } from './cpu-profile.js';

const [N, B, K] = [Number(process.argv[2] ?? 200_000), Number(process.argv[3] ?? 100), Number(process.argv[4] ?? 4)];
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });

let nextId = 1;
/** The claim's one row, as node-postgres hands it over: its JSON column parsed from text. */
function claimRow(limit: number): unknown {
  const tuples: string[] = [];
  for (let i = 0; i < limit && nextId <= N; i++, nextId++) {
    tuples.push(`["${nextId}","noop","default",{"n": ${nextId}},0,1,25]`); // no optional field: seven
  }
  const jobs = tuples.length === 0 ? null : JSON.parse(`[${tuples.join(', ')}]`);
  // The rest of the row: no rule applies, no rate waits (the flags are false when absent).
  return { jobs, report: null, moves: null, probes: null, next_start_ms: null, next_start_in_ms: null };
}

const answer = async (statement: Parameters<Executor['query']>[0]): Promise<unknown[]> => {
  const { sql: text, params } = renderSql(statement);
  await new Promise((resolve) => setImmediate(resolve)); // a round trip's turn of the event loop
  if (text.includes('claimed as (')) {
    const limit = params.find((p) => typeof p === 'number') as number | undefined;
    return [claimRow(Math.min(limit ?? B, B))];
  }
  if (text.includes('completed_counts') || text.includes('settle_done')) return [{ report: null, moves: null, n: 0 }];
  return []; // the sweep (nothing buried, work may be ready), anything else
};
const executor: Executor = {
  query: answer,
  hot: (statement) => answer(statement),
  batch: async (statements) => Promise.all(statements.map(answer)),
  transaction: undefined,
};
const db: SkiplockConnection = {
  driver: 'pg',
  executor,
  interactiveTransactions: false,
  close: async () => {},
};

const stopProfile = await startCpuProfile();
const cpu0 = process.cpuUsage();
const t = performance.now();
await Promise.all(
  Array.from({ length: K }, async () => {
    const worker = createWorker({ db, jobs: [noop], concurrency: B, batchSize: B, logger: silentLogger });
    while ((await worker.runInvocation({ remainingMs: 600_000 })).claimed > 0) {}
  }),
);
const secs = (performance.now() - t) / 1000;
const cpu = process.cpuUsage(cpu0);
await stopProfile();
console.log(
  `worker alone K=${K} B=${B}: ${Math.round(N / secs)} jobs/s; node ${((cpu.user + cpu.system) / N).toFixed(2)} µs per job`,
);
