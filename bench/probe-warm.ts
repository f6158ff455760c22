/**
 * Dev probe (issue 41): Node's CPU per job in a warm process, measured as bench/run.ts processRate
 * measures it (cpuUsage around system.process(K), divided by the jobs). One process runs RUNS
 * processing runs of JOBS jobs (fresh database, setup, enqueueBulk(JOBS, 1000), vacuum analyze, the
 * window); the first WARM runs only warm V8 up and are printed apart. Under the lock:
 *   npx esbuild bench/probe-warm.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-warm.mjs --log-level=warning \
 *   && node .bench/probe-warm.mjs [RUNS] [K] [JOBS] [WARM] [SYSTEM]   (6, 4, 50000, 2, skiplock)
 * SYSTEM: skiplock (batch 500, keep, one connection per loop), raw-schema, graphile.
 * PROBE_HEAP=<file>: a sampling heap profile (every allocation sample, GC'd ones included) of the last run;
 * PROBE_PROF=<file>: a V8 CPU profile of the last run (bench/cpu-profile.ts). PROBE_JSON_TIME=1: the time
 * spent parsing json columns (the claim answer's jobs) inside each window, timed around node-postgres's parser.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import pg from 'pg';
import { startCpuProfile } from './cpu-profile.js';
import { dropDatabase, freshDatabase, vacuumAnalyze } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'bench_probe';
const RUNS = Number(process.argv[2] ?? 6);
const K = Number(process.argv[3] ?? 4);
const JOBS = Number(process.argv[4] ?? 50_000);
const WARM = Number(process.argv[5] ?? 2);
const which = process.argv[6] ?? 'skiplock';
const make = (): BenchSystem =>
  which === 'raw-schema' ? rawSchemaSystem(500) : which === 'graphile' ? graphileSystem() : skiplockSystem(500, 'keep');
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

let jsonMs = 0;
if (process.env.PROBE_JSON_TIME) {
  const parse = pg.types.getTypeParser(114, 'text');
  pg.types.setTypeParser(114, 'text', (text: string) => {
    const t = performance.now();
    const value = parse(text);
    jsonMs += performance.now() - t;
    return value;
  });
}
const us: number[] = [];
const rates: number[] = [];
for (let run = 0; run < RUNS; run++) {
  const system = make();
  const url = await freshDatabase(server, DB);
  await system.setup(url);
  const heap = process.env.PROBE_HEAP && run === RUNS - 1 ? new Session() : undefined;
  try {
    await system.enqueueBulk(JOBS, 1000);
    await vacuumAnalyze(url);
    if (heap) {
      heap.connect();
      await heap.post('HeapProfiler.startSampling', {
        samplingInterval: 512,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
    const stopProfile = run === RUNS - 1 ? await startCpuProfile() : async () => {};
    jsonMs = 0;
    const t = performance.now();
    const cpu0 = process.cpuUsage();
    await system.process(K);
    const cpu = process.cpuUsage(cpu0);
    await stopProfile();
    const ms = performance.now() - t;
    if (heap) {
      const { profile } = await heap.post('HeapProfiler.stopSampling');
      writeFileSync(process.env.PROBE_HEAP as string, JSON.stringify(profile));
    }
    const perJob = (cpu.user + cpu.system) / JOBS;
    const rate = Math.round(JOBS / (ms / 1000));
    const json = process.env.PROBE_JSON_TIME ? `, json ${((jsonMs * 1000) / JOBS).toFixed(2)} µs/job` : '';
    console.log(`run ${run}${run < WARM ? ' (warm-up)' : ''}: ${perJob.toFixed(2)} µs/job node${json}, ${rate} jobs/s`);
    if (run >= WARM) {
      us.push(perJob);
      rates.push(rate);
    }
  } finally {
    await system.teardown();
  }
}
console.log(
  `${which} K=${K} jobs=${JOBS}: warm median ${median(us).toFixed(2)} µs/job node (${us.map((u) => u.toFixed(2)).join(' ')}), ${median(rates)} jobs/s`,
);
await dropDatabase(server, DB);
process.exit(0);
