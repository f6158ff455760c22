/**
 * `npm run bench:serverless [-- --quick] [-- --json] [-- --rtt N]`: the serverless benchmark of issue
 * 11 — how soon a nudged job starts, how fast fan-out drains a burst under the invocation cap (on pg
 * and neon-http, and again with N ms added to every round trip to the database: 20 unless `--rtt`
 * says otherwise, `--rtt 0` for none), and how K concurrent invocations share the head of the queue. Writes bench/RESULTS.serverless.json (every
 * figure, the source the docs quote) and bench/RESULTS.serverless.md rendered from it, with the
 * hand-written notes of bench/serverless/NOTES.md appended (a --quick run: the `.quick` siblings,
 * not committed); with --json, also prints a summary as one JSON object on stdout.
 */
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { dropDatabase, freshDatabase, withClient } from './db.js';
import { today } from './results.js';
import { type BurstParams, type BurstResult, type BurstVariant, measureBurstDrain } from './serverless/burst.js';
import { measureBurstFloor } from './serverless/burst-floor.js';
import { workerColdImport } from './serverless/cold-start.js';
import { progressLog } from './serverless/figures.js';
import { type LingerParams, type LingerResult, measureLinger } from './serverless/linger.js';
import {
  serveNeonHttpEndpointIfAsked,
  startNeonHttpEndpointProcess,
  warmNeonHttpEndpoint,
} from './serverless/neon-endpoint.js';
import { measureNudgeLatency, type NudgeParams } from './serverless/nudge.js';
import { measureProcess, processSettings } from './serverless/process.js';
import { writeServerlessReport } from './serverless/report.js';
import { invocationUrl } from './serverless/worker-function.js';

// Started again with SKIPLOCK_BENCH_ROLE set, this bundle is the SQL-over-HTTP endpoint alone.
await serveNeonHttpEndpointIfAsked();

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const asJson = args.includes('--json');
/** The slow link's added round trip (issue 41): `--rtt N`, 20 ms by default, 0 for none. */
const rttArg = args.indexOf('--rtt');
const ADDED_RTT_MS = rttArg >= 0 ? Number(args[rttArg + 1]) : 20;
if (!(Number.isFinite(ADDED_RTT_MS) && ADDED_RTT_MS >= 0)) throw new Error('--rtt takes a number of ms, 0 or more');
const log = progressLog(asJson);

const PARAMS = quick
  ? { nudge: { jobs: 60, warmup: 3, ticks: 10 }, processJobs: 10_000, linger: { jobs: 10, meanGapMs: 500 } }
  : { nudge: { jobs: 300, warmup: 5, ticks: 50 }, processJobs: 50_000, linger: { jobs: 40, meanGapMs: 1_000 } };
const NUDGE: NudgeParams = PARAMS.nudge;
const BURST: BurstParams = {
  jobs: 10_000,
  jobMs: 100,
  concurrency: 10,
  maxInvocations: 20,
  functionTimeoutMs: 60_000, // serverless.yml's worker
  giveUpMs: 90_000,
};
const KS = [1, 4, 16, 32] as const;
const LINGER: LingerParams = PARAMS.linger;
const LINGER_VARIANTS = [
  { label: 'nudge, no linger', lingerMs: 0, nudge: true },
  { label: 'tick only, no linger', lingerMs: 0, nudge: false },
  { label: 'tick, SKIPLOCK_LINGER_MS=1000', lingerMs: 1_000, nudge: false },
  { label: 'tick, SKIPLOCK_LINGER_MS=5000', lingerMs: 5_000, nudge: false },
];
/** The benchmark's own database, dropped at the end (never the `test` database the tests share). */
const DB = 'skiplock_bench_serverless';
const NOTES = 'bench/serverless/NOTES.md';

// A phase drops its database with (force): a pool that still holds a connection then gets 57P01.
process.on('uncaughtException', (err) => {
  if ((err as { code?: string }).code === '57P01') return;
  console.error(err);
  process.exit(1);
});
// The real AWS SDK needs a region and credentials; the local Invoke endpoint checks neither.
Object.assign(process.env, {
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'skiplock-bench',
  AWS_SECRET_ACCESS_KEY: 'skiplock-bench',
});

const database = await resolveTestDatabase();
const server = database.url;
const started = Date.now();
const loadBefore = loadavg();
const postgres = await withClient(server, async (c) =>
  String((await c.query('show server_version')).rows[0].server_version),
);

try {
  log(`phase 1: enqueue commit → handler start (${NUDGE.jobs} nudged jobs, ${NUDGE.ticks} ticks)`);
  const nudge = await measureNudgeLatency(await freshDatabase(server, DB), NUDGE);
  log(
    `  nudge ${JSON.stringify(nudge.nudge)}; tick → handler ${JSON.stringify(nudge.claim)}; cron ${JSON.stringify(nudge.cron)}`,
  );

  log(`phase 2: burst drain (${BURST.jobs} jobs of ${BURST.jobMs} ms, ${BURST.maxInvocations} invocations at most)`);
  const bursts: BurstResult[] = [];
  const burst = async (variant: BurstVariant, warm?: (url: string) => Promise<void>) => {
    const url = await freshDatabase(server, DB);
    // The pool the invocations will use: the endpoint keeps one per connection string, and theirs
    // carries an application_name (until 2026-11-29 the warm-up opened another, and the drain paid
    // for 16–20 new connections, cold backends, on the machine it was measured on).
    await warm?.(invocationUrl(url));
    const result = await measureBurstDrain(url, variant, BURST);
    bursts.push(result);
    log(
      `  ${result.label}: ${result.seconds} s (ideal ${result.idealSeconds} s), ${result.invocationsStarted} invocations, at most ${result.maxConcurrentInvocations} at once (${result.maxSlotsHeld} slots), ${result.peakConnections.invocations} connections, lost ${result.lost}; ${result.statementsPerJob} statements per job; ${JSON.stringify(result.load)}`,
    );
  };
  await burst({ driver: 'pg', label: 'pg' });
  const burstFloors = [await measureBurstFloor(await freshDatabase(server, DB), BURST)];
  const neon = await startNeonHttpEndpointProcess();
  try {
    const warm = (url: string) => warmNeonHttpEndpoint(neon, url);
    await burst({ driver: 'neon-http', label: 'neon-http', neon: neon.neon, endpointPid: neon.pid }, warm);
    const floorDb = await freshDatabase(server, DB);
    await warm(floorDb);
    burstFloors.push(await measureBurstFloor(floorDb, BURST, neon.neon, neon.pid));
  } finally {
    await neon.close();
  }
  log(`  the floors (no library, every loop from the start): ${JSON.stringify(burstFloors)}`);
  // Tried: a local queue of one more batch per invocation, so the claim's round trip overlaps the running jobs.
  await burst({ driver: 'pg', label: 'pg, SKIPLOCK_BATCH_SIZE=20 (tried)', env: { SKIPLOCK_BATCH_SIZE: '20' } });
  // A function far from its database (issue 41): the same bursts with every round trip slower (after
  // the others: the docs quote bursts 0 to 2 by their place).
  if (ADDED_RTT_MS > 0) {
    const slow = await startNeonHttpEndpointProcess(ADDED_RTT_MS);
    try {
      await burst(
        {
          driver: 'neon-http',
          label: `neon-http +${ADDED_RTT_MS} ms`,
          neon: slow.neon,
          addedRoundTripMs: ADDED_RTT_MS,
          endpointPid: slow.pid,
        },
        (url) => warmNeonHttpEndpoint(slow, url, 20, 10),
      );
    } finally {
      await slow.close();
    }
    await burst({ driver: 'pg', label: `pg +${ADDED_RTT_MS} ms`, addedRoundTripMs: ADDED_RTT_MS });
  }
  const coldImportMs = (await workerColdImport()).worker;
  log(`  worker bundle cold import ${coldImportMs} ms`);

  log(`phase 3: K = ${KS.join(', ')} invocations on no-op jobs (${PARAMS.processJobs} jobs per run)`);
  const processed = await measureProcess(server, DB, KS, PARAMS.processJobs, log);

  log(`phase 4: linger (${LINGER.jobs} jobs, mean gap ${LINGER.meanGapMs} ms)`);
  const linger: LingerResult[] = [];
  for (const variant of LINGER_VARIANTS) {
    const result = await measureLinger(await freshDatabase(server, DB), variant, LINGER);
    linger.push(result);
    log(`  ${result.label}: ${JSON.stringify(result)}`);
  }

  const durationS = Math.round((Date.now() - started) / 1000);
  const path = writeServerlessReport(
    {
      date: today(),
      quick,
      durationS,
      machine: {
        cores: cpus().length,
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        postgres,
        node: process.version,
        loadBefore,
        loadAfter: loadavg(),
      },
      nudgeParams: NUDGE,
      nudge,
      burstParams: BURST,
      bursts,
      burstFloors,
      coldImportMs,
      processJobs: PARAMS.processJobs,
      process: processed,
      processSettings: processSettings(),
      lingerParams: LINGER,
      linger,
    },
    existsSync(NOTES) ? readFileSync(NOTES, 'utf8') : '',
  );
  const pgBurst = bursts[0] as BurstResult;
  if (asJson) {
    console.log(
      JSON.stringify({
        nudge_latency_ms: { p50: nudge.nudge.p50, p99: nudge.nudge.p99 },
        cron_latency_ms: { p50: nudge.cron.p50 },
        burst_drain: {
          seconds: pgBurst.seconds,
          ideal_seconds: pgBurst.idealSeconds,
          invocations_started: pgBurst.invocationsStarted,
          max_concurrent_invocations: pgBurst.maxConcurrentInvocations,
          limit: pgBurst.limit,
          lost: pgBurst.lost,
        },
        burst_drain_by_driver: Object.fromEntries(
          bursts
            .filter((b) => !b.label.includes('(tried)'))
            .map((b) => [b.label, { seconds: b.seconds, ideal_seconds: b.idealSeconds }]),
        ),
        burst_floor: Object.fromEntries(
          burstFloors.map((f) => [f.transport, { seconds: f.seconds, ideal_seconds: f.idealSeconds }]),
        ),
        process: processed,
        linger: Object.fromEntries(
          linger.map((l) => [
            l.label,
            { latency_ms: l.latencyMs, left_for_tick: l.leftForTick, function_seconds: l.functionSeconds },
          ]),
        ),
      }),
    );
  }
  log(`done in ${durationS} s: ${path}`);
} finally {
  await dropDatabase(server, DB);
  await database.stop();
}
process.exit(0);
