/**
 * `npm run bench [-- --quick] [-- --json] [-- --soak]`: skiplock, graphile-worker and pg-boss side
 * by side on the same Postgres, plus the raw-SQL floor. Writes bench/RESULTS.json (every figure,
 * the source the docs quote), bench/RESULTS.md rendered from it and bench/process.svg (a --quick
 * run: the `.quick` siblings, not committed); `--json` also prints the record on stdout. `--soak`
 * adds the soak phase (bench/soak.ts: claims while VACUUM lags, both completion modes; 24 min, or
 * 4 min with --quick), also written to bench/RESULTS.soak.json; `--soak-only` runs just that phase,
 * prints it and writes that file.
 * `--batch-only` runs just the batch_handler phase (bench/batch-handler.ts, pg-boss beside skiplock) and prints it;
 * `--events-only` just the events_publish phase (bench/events.ts).
 * Phase 12 (`schedule_tick`, bench/schedule-tick.ts): 1,000,000 run-time schedules, 1,000 due;
 * `--schedule-tick-only` runs just that phase and prints it.
 * `--process-only` runs just the processing phase for skiplock, graphile-worker and the floor on
 * skiplock's table at K = 1, 4 and 16 and prints their rates and ratios (`ratio`: skiplock ÷
 * graphile-worker, `floor_ratio`: the floor ÷ graphile-worker, `of_floor`: skiplock ÷ the floor;
 * writes nothing): an A/B of a change to the worker's fixed cost.
 */
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import * as z from 'zod';
import type { Completion } from '../base/outcomes.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { CONNECT_DEFAULTS, connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { type BatchHandlerFigures, batchHandlerSection, runBatchHandlerBench } from './batch-handler.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, walBytes, withClient } from './db.js';
import { eventsPublishPhase } from './events.js';
import { type BenchRecord, soakRecord, soakSection, writeReport } from './report.js';
import { resultPath, today, writeResult } from './results.js';
import { runScheduleTick, SCHEDULE_TICK_FULL, SCHEDULE_TICK_QUICK } from './schedule-tick.js';
import { workerColdImport } from './serverless/cold-start.js';
import { runSoak, SOAK_FULL, SOAK_QUICK, type SoakResult } from './soak.js';
import { graphileSystem } from './systems/graphile.js';
import { pgBossSystem } from './systems/pgboss.js';
import { rawSystem } from './systems/raw.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem, withFillfactor } from './systems/skiplock.js';
import type { BenchSystem, Flow } from './systems/types.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const asJson = args.includes('--json');
const soak = args.includes('--soak') || args.includes('--soak-only');
const log = (line: string) => {
  if (!asJson) console.log(line);
  else process.stderr.write(`${line}\n`);
};

export const PARAMS = quick
  ? {
      single: 2_000,
      bulk: 20_000,
      bulkBatch: 1_000,
      process: 10_000,
      reps: 3,
      processReps: 5,
      finishedRows: 200_000,
      queuedRows: 20_000,
      wal: 5_000,
      claims: 500,
    }
  : {
      single: 10_000,
      bulk: 100_000,
      bulkBatch: 1_000,
      process: 50_000,
      reps: 3,
      // Processing is where the targets are ±5 % and one run drifts more: five reps a row, not three.
      processReps: 5,
      finishedRows: 1_000_000,
      queuedRows: 100_000,
      wal: 10_000,
      claims: 2_000, // p99 over 2,000 claims: 20 samples in the tail, not 5
    };
const SKIPLOCK_BATCH = 500;
const KEEP_FILLFACTOR_30 = 'skiplock (fillfactor 30)';
const KS = [1, 4, 16] as const;
const DB = 'skiplock_bench';

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
};
const rate = (n: number, ms: number) => Math.round(n / (ms / 1000));
/** Appends a measurement to the series of `key`. */
const record = (series: Record<string, number[]>, key: string, value: number) => {
  series[key] = [...(series[key] ?? []), value];
};

/** Node's CPU per job (µs, user + system) of each processing run, by K and system: moves less than jobs/s. */
const nodeCpu: Record<string, Record<string, number[]>> = {};
const nodeCpuMedians = () =>
  Object.fromEntries(
    Object.entries(nodeCpu).map(([k, bySystem]) => [
      k,
      Object.fromEntries(Object.entries(bySystem).map(([n, v]) => [n, median(v)])),
    ]),
  );

// Each phase drops its database with (force); a peer's pool that still holds a connection then
// gets 57P01 on an idle client. That is our doing, not a failure of the system under test.
process.on('uncaughtException', (err) => {
  if ((err as { code?: string }).code === '57P01') return;
  console.error(err);
  process.exit(1);
});
const database = await resolveTestDatabase();
const server = (() => {
  const url = new URL(database.url);
  return url.toString();
})();

async function withSystem<T>(
  make: () => BenchSystem,
  fn: (system: BenchSystem, url: string) => Promise<T>,
): Promise<T> {
  const system = make();
  const url = await freshDatabase(server, DB);
  await system.setup(url);
  try {
    return await fn(system, url);
  } finally {
    await system.teardown();
  }
}

const makers: Record<string, () => BenchSystem> = {
  skiplock: () => skiplockSystem(SKIPLOCK_BATCH),
  'graphile-worker': () => graphileSystem(),
  'pg-boss': () => pgBossSystem(500),
};
const names = Object.keys(makers);
/** Processing and WAL also run skiplock with completedJobs 'delete' (the enqueue path is the same). */
const DELETE_MODE = 'skiplock (delete)';
const processMakers: Record<string, () => BenchSystem> = {
  ...makers,
  [DELETE_MODE]: () => skiplockSystem(SKIPLOCK_BATCH, 'delete'),
};
const processNames = Object.keys(processMakers);
/** Delete-mode figures live under their own key: the issue's objects hold exactly the three systems. */
const deleteMode: Record<string, number> = {};
/** Alternate the order of systems between repetitions. */
const rotated = (rep: number) => names.map((_, i) => names[(i + rep) % names.length] as string);

const serverVersion = await withClient(server, async (c) =>
  String((await c.query('show server_version')).rows[0].server_version),
);
const results: Record<string, unknown> = {};
const started = Date.now();
const machine = {
  cores: cpus().length,
  memoryGiB: Math.round(totalmem() / 2 ** 30),
  postgres: serverVersion,
  node: process.version,
};

/** Phase 9: the soak (bench/soak.ts), keep and delete mode, on a fresh database. */
async function soakPhase(): Promise<Record<Completion, SoakResult>> {
  log(`phase 9: soak, claims while VACUUM lags (${quick ? '--quick' : 'full'})`);
  const url = await freshDatabase(server, DB);
  const params = quick ? SOAK_QUICK : SOAK_FULL;
  const keep = await runSoak({ url, completion: 'keep', ...params, progress: log });
  const deleted = await runSoak({ url, completion: 'delete', ...params, progress: log });
  return { keep, delete: deleted };
}
if (args.includes('--soak-only')) {
  results.soak = await soakPhase();
  log(soakSection(results.soak as Record<Completion, SoakResult>));
  const file = resultPath('soak', quick);
  writeResult(file, soakRecord({ date: today(), quick, machine, soak: results.soak }));
  log(`wrote ${file}`);
  if (asJson) console.log(JSON.stringify({ soak: results.soak }));
  await dropDatabase(server, DB);
  await database.stop();
  process.exit(0);
}

/** Phase 11: a batch handler of 100 against one job per call (bench/batch-handler.ts). */
async function batchHandlerPhase() {
  log('phase 11: batch handler');
  const url = await freshDatabase(server, DB);
  const jobs = quick ? { noop: 10_000, bulk_api: 2_000 } : { noop: 50_000, bulk_api: 5_000 };
  return runBatchHandlerBench({ url, jobs, reps: PARAMS.reps, log });
}
if (args.includes('--events-only')) {
  results.events_publish = await eventsPublishPhase({ server, events: quick ? 1_000 : 5_000, reps: PARAMS.reps, log });
  if (asJson) console.log(JSON.stringify({ events_publish: results.events_publish }));
  await database.stop();
  process.exit(0);
}
if (args.includes('--batch-only')) {
  results.batch_handler = await batchHandlerPhase();
  log(batchHandlerSection(results.batch_handler as BatchHandlerFigures));
  if (asJson) console.log(JSON.stringify({ batch_handler: results.batch_handler }));
  await dropDatabase(server, DB);
  await database.stop();
  process.exit(0);
}

/** Phase 12: run-time schedules, 1,000,000 of which 1,000 due (bench/schedule-tick.ts). */
async function scheduleTickPhase() {
  log(`phase 12: schedule tick (${quick ? '--quick' : 'full'})`);
  return runScheduleTick(server, quick ? SCHEDULE_TICK_QUICK : SCHEDULE_TICK_FULL, log);
}
if (args.includes('--schedule-tick-only')) {
  results.schedule_tick = await scheduleTickPhase();
  log(JSON.stringify(results.schedule_tick, null, 2));
  if (asJson) console.log(JSON.stringify({ schedule_tick: results.schedule_tick }));
  await database.stop();
  process.exit(0);
}

if (args.includes('--process-only')) {
  // The floor (minimal SQL on skiplock's own table, bench/systems/raw-schema.ts) runs beside the pair
  // at every K: how far the schema alone gets in a run this short, so a ratio to graphile-worker can be
  // read against what no library could beat on this table.
  const floor = 'raw (skiplock schema)';
  const trio = ['skiplock', 'graphile-worker', floor];
  const make = (name: string) =>
    name === floor ? () => rawSchemaSystem(SKIPLOCK_BATCH) : (makers[name] as () => BenchSystem);
  const figures: Record<string, Record<string, number>> = {};
  const ratio = (a: number, b: number) => Math.round((a / (b || 1)) * 100) / 100;
  for (const k of KS) {
    const runs: Record<string, number[]> = {};
    for (let rep = 0; rep < PARAMS.processReps; rep++) {
      for (const name of rep % 2 === 0 ? trio : [...trio].reverse()) {
        record(runs, name, await processRate(make(name), k, name));
      }
    }
    const [ours, theirs, least] = trio.map((n) => median(runs[n] ?? []));
    figures[`process_k${k}`] = {
      skiplock: ours ?? 0,
      'graphile-worker': theirs ?? 0,
      ratio: ratio(ours ?? 0, theirs ?? 0),
      floor: least ?? 0,
      floor_ratio: ratio(least ?? 0, theirs ?? 0),
      of_floor: ratio(ours ?? 0, least ?? 0),
    };
    log(`  K=${k} ${JSON.stringify(figures[`process_k${k}`])} runs ${JSON.stringify(runs)}`);
  }
  log(`  Node µs per job: ${JSON.stringify(nodeCpuMedians())}`);
  if (asJson) console.log(JSON.stringify({ quick, ...figures, node_us_per_job: nodeCpuMedians() }));
  await dropDatabase(server, DB);
  await database.stop();
  process.exit(0);
}

// 1. Enqueue.
log('phase 1: enqueue');
const single: Record<string, number[]> = {};
const bulk: Record<string, number[]> = {};
for (let rep = 0; rep < PARAMS.reps; rep++) {
  for (const name of rotated(rep)) {
    const make = makers[name] as () => BenchSystem;
    await withSystem(make, async (system) => {
      const t = performance.now();
      await system.enqueueSingle(PARAMS.single);
      record(single, name, rate(PARAMS.single, performance.now() - t));
    });
    await withSystem(make, async (system) => {
      const t = performance.now();
      await system.enqueueBulk(PARAMS.bulk, PARAMS.bulkBatch);
      record(bulk, name, rate(PARAMS.bulk, performance.now() - t));
    });
  }
}
results.enqueue_single = Object.fromEntries(names.map((n) => [n, median(single[n] ?? [])]));
results.enqueue_bulk = Object.fromEntries(names.map((n) => [n, median(bulk[n] ?? [])]));
log(`  single ${JSON.stringify(results.enqueue_single)}  bulk ${JSON.stringify(results.enqueue_bulk)}`);

// 2. Processing (and 6. the raw floor at K = 4, and at K = 16 as the reference for contention).
async function processRate(make: () => BenchSystem, k: number, name?: string): Promise<number> {
  return withSystem(make, async (system, url) => {
    await system.enqueueBulk(PARAMS.process, PARAMS.bulkBatch);
    await vacuumAnalyze(url);
    const t = performance.now();
    const cpu0 = process.cpuUsage();
    await system.process(k);
    const cpu = process.cpuUsage(cpu0);
    if (name !== undefined) {
      nodeCpu[`k${k}`] ??= {};
      record(
        nodeCpu[`k${k}`] as Record<string, number[]>,
        name,
        Math.round(((cpu.user + cpu.system) / PARAMS.process) * 10) / 10,
      );
    }
    return rate(PARAMS.process, performance.now() - t);
  });
}
log('phase 2: processing');
for (const k of KS) {
  const runs: Record<string, number[]> = {};
  for (let rep = 0; rep < PARAMS.processReps; rep++) {
    for (const name of processNames.map((_, i) => processNames[(i + rep) % processNames.length] as string)) {
      record(runs, name, await processRate(processMakers[name] as () => BenchSystem, k, name));
    }
    if (k === 4) {
      record(runs, 'pg-boss (batch 100)', await processRate(() => pgBossSystem(100), k));
      record(runs, 'raw (update)', await processRate(() => rawSystem(SKIPLOCK_BATCH, 'update'), k, 'raw (update)'));
      record(runs, 'raw (delete)', await processRate(() => rawSystem(SKIPLOCK_BATCH, 'delete'), k));
      const schemaFloor = 'raw (skiplock schema)';
      record(runs, schemaFloor, await processRate(() => rawSchemaSystem(SKIPLOCK_BATCH), k, schemaFloor));
    }
    // One invocation on the default pool (what a deployed worker gets): a batch's settle runs beside the next claim.
    if (k === 1)
      record(
        runs,
        'skiplock (default pool)',
        await processRate(() => skiplockSystem(SKIPLOCK_BATCH, 'keep', CONNECT_DEFAULTS.max), k),
      );
    // Does the floor itself lose throughput with 16 independent SKIP LOCKED claimers?
    if (k === 16) record(runs, 'raw (update)', await processRate(() => rawSystem(SKIPLOCK_BATCH, 'update'), k));
  }
  results[`process_k${k}`] = Object.fromEntries(names.map((n) => [n, median(runs[n] ?? [])]));
  deleteMode[`process_k${k}`] = median(runs[DELETE_MODE] ?? []);
  if (k === 4) {
    results.pgboss_batch100_k4 = median(runs['pg-boss (batch 100)'] ?? []);
    results.raw_floor_k4 = median(runs['raw (update)'] ?? []);
    results.raw_floor_delete_k4 = median(runs['raw (delete)'] ?? []);
    results.raw_schema_floor_k4 = median(runs['raw (skiplock schema)'] ?? []);
  }
  if (k === 16) results.raw_floor_k16 = median(runs['raw (update)'] ?? []);
  if (k === 1) results.skiplock_default_pool_k1 = median(runs['skiplock (default pool)'] ?? []);
  log(`  K=${k} ${JSON.stringify(results[`process_k${k}`])} ${DELETE_MODE}: ${deleteMode[`process_k${k}`]}`);
}
results.node_us_per_job = nodeCpuMedians();
log(`  Node µs per job: ${JSON.stringify(results.node_us_per_job)}`);
log(
  `  raw floor K=4: update ${results.raw_floor_k4}, delete ${results.raw_floor_delete_k4}, on skiplock's table ${results.raw_schema_floor_k4}; K=16: update ${results.raw_floor_k16}; pg-boss batch 100: ${results.pgboss_batch100_k4}`,
);

// 8. Flow control (issue 12) at K = 4: 1,000 ordering keys, and 1,000 keys limited to 5 running each,
// beside each peer's nearest mechanism (pg-boss key_strict_fifo and groupConcurrency,
// graphile-worker named queues; graphile-worker has no per-key limit above one).
log('phase 8: flow control (K = 4)');
const FLOW_KEYS = 1_000;
const flows: Record<string, Flow> = {
  ordering: { mode: 'ordering', keys: FLOW_KEYS },
  per_key_limit: { mode: 'perKey', keys: FLOW_KEYS, perKey: 5 },
};
const flowMakers = (flow: Flow): Record<string, () => BenchSystem> => ({
  skiplock: () => skiplockSystem(SKIPLOCK_BATCH, 'keep', 1, flow),
  ...(flow.mode === 'ordering' ? { 'graphile-worker': () => graphileSystem(flow) } : {}),
  'pg-boss': () => pgBossSystem(500, flow),
});
const flowResults: Record<string, Record<string, number>> = {};
for (const [label, flow] of Object.entries(flows)) {
  const runs: Record<string, number[]> = {};
  const flowing = flowMakers(flow);
  const order = Object.keys(flowing);
  for (let rep = 0; rep < PARAMS.reps; rep++) {
    for (const name of order.map((_, i) => order[(i + rep) % order.length] as string)) {
      record(runs, name, await processRate(flowing[name] as () => BenchSystem, 4));
    }
  }
  flowResults[label] = Object.fromEntries(order.map((n) => [n, median(runs[n] ?? [])]));
  log(`  ${label}: ${JSON.stringify(flowResults[label])}`);
}
results.flow_k4 = { keys: FLOW_KEYS, per_key: 5, ...flowResults };

// 10. Events (issue 39): publish to 5 subscribers, beside pg-boss's publish to 5 subscribed queues.
log('phase 10: events_publish');
results.events_publish = await eventsPublishPhase({ server, events: quick ? 1_000 : 5_000, reps: PARAMS.reps, log });

// 3. Round trips per job (counted at the driver).
log('phase 3: round trips');
const roundTrips: Record<string, number> = {};
for (const batch of [1, 10, 100]) {
  const jobs = batch * 20;
  roundTrips[String(batch)] = await withSystem(
    () => skiplockSystem(batch),
    async (system) => {
      await system.enqueueBulk(jobs, 1_000);
      let statements = 0;
      const original = pg.Client.prototype.query as (...a: unknown[]) => unknown;
      (pg.Client.prototype as unknown as { query: unknown }).query = function (this: unknown, ...a: unknown[]) {
        const text = typeof a[0] === 'string' ? a[0] : String((a[0] as { text?: string })?.text ?? '');
        if (text.includes('skiplock') && !text.startsWith('select count(*) as n')) statements++; // not the bench's own polling
        return original.apply(this, a);
      };
      try {
        await system.process(1);
      } finally {
        (pg.Client.prototype as unknown as { query: unknown }).query = original;
      }
      return Math.round((statements / jobs) * 1000) / 1000;
    },
  );
}
results.round_trips_per_job = roundTrips;
log(`  statements per job: ${JSON.stringify(roundTrips)}`);

// 4. Scale: claim latency with an empty table, with many finished rows, with many queued.
log('phase 4: scale');
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }) });
async function claimLatencies(prefill: (url: string) => Promise<void>): Promise<{ p50: number; p99: number }> {
  const url = await freshDatabase(server, DB);
  const db = connect({ connectionString: url, max: 1 });
  try {
    await migrate(db);
    await prefill(url);
    await createEnqueuer().enqueueMany(
      db,
      Array.from({ length: PARAMS.claims * 10 }, (_, n) => noop.with({ n })),
    );
    await vacuumAnalyze(url);
    const times: number[] = [];
    let settle: { id: string; leaseToken: string; outcome: 'completed' }[] = [];
    for (let i = 0; i < PARAMS.claims; i++) {
      const t = performance.now();
      const claim = await claimJobs(db.executor, 'skiplock', {
        leases: [{ kind: 'noop', leaseMs: 30_000 }],
        limit: 10,
        invocationId: 'bench',
        settle,
      });
      times.push(performance.now() - t);
      settle = claim.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' }));
    }
    const sorted = times.sort((a, b) => a - b);
    const at = (q: number) =>
      Math.round((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) * 1000) / 1000;
    return { p50: at(0.5), p99: at(0.99) };
  } finally {
    await db.close();
  }
}
const fillFinished = (url: string) =>
  withClient(url, async (c) => {
    await c.query(`insert into skiplock.jobs (kind, payload, state, finished_at, dead_reason, attempt)
      select 'noop', jsonb_build_object('n', g), case when g % 10 = 0 then 'dead' else 'completed' end,
        now() - (g || ' seconds')::interval, case when g % 10 = 0 then 'max_attempts' end, 1
      from generate_series(1, ${PARAMS.finishedRows}) g`);
  });
const fillQueued = (url: string) =>
  withClient(url, async (c) => {
    await c.query(
      `insert into skiplock.jobs (kind, payload) select 'noop', jsonb_build_object('n', g) from generate_series(1, ${PARAMS.queuedRows}) g`,
    );
  });
const scale = {
  empty: await claimLatencies(async () => {}),
  finished: await claimLatencies(fillFinished),
  queued: await claimLatencies(fillQueued),
};
results.claim_p99_ms = { empty: scale.empty.p99, finished_1m: scale.finished.p99 };
results.claim_latency_ms = scale;
log(`  claim (10 jobs, settles the previous 10) p50/p99 ms: ${JSON.stringify(scale)}`);

// 5. WAL per job lifecycle (enqueue → claim → complete).
log('phase 5: WAL');
const wal: Record<string, number> = {};
for (const [name, make] of [
  ...Object.entries(processMakers),
  ['raw (update)', () => rawSystem(SKIPLOCK_BATCH, 'update')] as const,
  ['raw (delete)', () => rawSystem(SKIPLOCK_BATCH, 'delete')] as const,
  // The same minimal SQL on skiplock's table: what its indexes and row cost (the keep-mode floor).
  ['raw (skiplock schema)', () => rawSchemaSystem(SKIPLOCK_BATCH)] as const,
  // Keep mode with the fillfactor docs/performance.md offers for WAL over space (bench/history.md item 32).
  [KEEP_FILLFACTOR_30, () => withFillfactor(skiplockSystem(SKIPLOCK_BATCH), 30)] as const,
]) {
  wal[name] = await withSystem(make, async (system, url) => {
    const bytes = await walBytes(url, async () => {
      await system.enqueueBulk(PARAMS.wal, PARAMS.bulkBatch);
      await system.process(4);
    });
    return Math.round(bytes / PARAMS.wal);
  });
}
results.wal_bytes_per_job = Object.fromEntries(names.map((n) => [n, wal[n]]));
deleteMode.wal_bytes_per_job = wal[DELETE_MODE] ?? 0;
results.skiplock_delete = deleteMode;
results.wal_raw_bytes_per_job = wal['raw (update)'];
results.wal_raw_delete_bytes_per_job = wal['raw (delete)'];
results.wal_raw_schema_bytes_per_job = wal['raw (skiplock schema)'];
results.wal_fillfactor_30_bytes_per_job = wal[KEEP_FILLFACTOR_30];
log(`  WAL bytes per job: ${JSON.stringify(wal)}`);

if (soak) results.soak = await soakPhase();
results.schedule_tick = await scheduleTickPhase();

results.batch_handler = await batchHandlerPhase();

await dropDatabase(server, DB);
await database.stop();

// 7. Cold start: the worker bundle and its import time vs a bare handler, once the database has
// stopped (its checkpoint of the run's writes would otherwise share the machine with the imports).
log('phase 7: cold start');
const cold = await workerColdImport();
results.bundle_bytes = cold.bytes;
results.cold_import_ms = { worker: cold.worker, bare: cold.bare };
log(`  worker bundle ${results.bundle_bytes} bytes; cold import ${JSON.stringify(results.cold_import_ms)}`);

/** The peers as installed (npm ci from package-lock.json), read from their own package.json. */
const versions = Object.fromEntries(
  ['graphile-worker', 'pg-boss'].map((name) => [
    name,
    (JSON.parse(readFileSync(join('node_modules', name, 'package.json'), 'utf8')) as { version: string }).version,
  ]),
);
const settings = Object.fromEntries(
  [...Object.entries(processMakers), ['raw', () => rawSystem(SKIPLOCK_BATCH)] as const].map(([n, make]) => [
    n,
    make().settings,
  ]),
);
const run: BenchRecord = {
  date: today(),
  duration_s: Math.round((Date.now() - started) / 1000),
  quick,
  machine,
  versions,
  params: PARAMS,
  settings,
  ...results,
};
const written = writeReport(run);
if (asJson) console.log(JSON.stringify(run));
log(`done in ${run.duration_s} s: ${written.join(', ')}`);
process.exit(0);
