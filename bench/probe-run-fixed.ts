/**
 * Dev probe (issue 41): the fixed Node CPU of one bench processing run (bench/run.ts processRate),
 * and where it goes. Under the lock:
 *   npx esbuild bench/probe-run-fixed.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-run-fixed.mjs --log-level=warning \
 *   && node --expose-gc .bench/probe-run-fixed.mjs [TRIALS] [K] [JOBS,JOBS] [MODES]   (5, 4, 10000,50000, asis,gc)
 *
 * Each trial, for every JOBS and mode, runs skiplock (batch 500, keep) and graphile-worker in
 * alternating order exactly as processRate does (fresh database, setup, enqueueBulk(JOBS, 1000),
 * vacuum analyze, then the measured window around system.process(K)); mode `gc` calls global.gc()
 * right before the window (both systems). Per run: Node cpuUsage over the window, wall, and the
 * main thread's GC pauses inside it by kind (PerformanceObserver 'gc'). Prints medians of every
 * cell and the fixed part per run from the two JOBS sizes: a = cpu(J1) − J1 · (cpu(J2) − cpu(J1)) / (J2 − J1).
 * PROBE_SPLIT=1 adds `skiplock-split`: the same loop as bench/systems/skiplock.ts with Node CPU per
 * phase (connect + createWorker, each invocation, close, the final count) — meaningful at K = 1.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, waitUntilDrained } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB = 'probe_run_fixed';
const TRIALS = Number(process.argv[2] ?? 5);
const K = Number(process.argv[3] ?? 4);
const SIZES = (process.argv[4] ?? '10000,50000').split(',').map(Number);
const MODES = (process.argv[5] ?? 'asis,gc').split(',');
const gc = (globalThis as { gc?: () => void }).gc;
if (MODES.includes('gc') && !gc) throw new Error('run with node --expose-gc');
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
const cpuMs = (since?: NodeJS.CpuUsage) => {
  const c = process.cpuUsage(since);
  return (c.user + c.system) / 1000;
};

// Every GC pause of the main thread, kept with its start time; a window reads the ones inside it.
const pauses: { start: number; ms: number; kind: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    pauses.push({
      start: e.startTime,
      ms: e.duration,
      kind: (e as unknown as { detail: { kind: number } }).detail.kind,
    });
}).observe({ entryTypes: ['gc'] });
const KIND: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incr',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** bench/systems/skiplock.ts's process(k), with Node CPU per phase added to `phases`. */
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const phases: Record<string, number[]> = {};
/** PROBE_MARKS=N: Node CPU (ms since the invocation started) each time N more jobs have finished;
 * PROBE_MARKS_LIVE=1 also prints each as it comes (`MARK ms`), between V8's trace lines. */
const MARK = Number(process.env.PROBE_MARKS ?? 0);
let done = 0;
let marks: number[] = [];
let markFrom: NodeJS.CpuUsage | undefined;
const marked = defineJob({
  kind: 'noop',
  payload: z.object({ n: z.number() }),
  handler: async () => {
    if (MARK && ++done % MARK === 0 && markFrom) {
      marks.push(cpuMs(markFrom));
      // Live, so that V8's --trace-opt / --trace-deopt / --trace-gc lines fall between the marks.
      if (process.env.PROBE_MARKS_LIVE) console.log(`MARK ${(marks.at(-1) ?? 0).toFixed(1)}`);
    }
  },
});
const add = (key: string, v: number) => {
  phases[key] = [...(phases[key] ?? []), v];
};
function split(): BenchSystem {
  const base = skiplockSystem(500, 'keep');
  let url = '';
  return {
    ...base,
    name: 'skiplock-split',
    async setup(target) {
      url = target;
      await base.setup(target);
    },
    async process(k) {
      await Promise.all(
        Array.from({ length: k }, async () => {
          let c = process.cpuUsage();
          const own = connect({ connectionString: url, max: 1 });
          const worker = createWorker({
            db: own,
            jobs: [MARK ? marked : noop],
            concurrency: 500,
            batchSize: 500,
            logger: silentLogger,
            completedJobs: 'keep',
            maxInvocations: 64,
          });
          add('create', cpuMs(c));
          let i = 0;
          while (true) {
            c = process.cpuUsage();
            markFrom = c;
            const w = performance.now();
            const summary = await worker.runInvocation({ remainingMs: 600_000 });
            const label = summary.claimed === 0 ? 'empty' : i === 0 ? 'inv0' : 'inv1+';
            add(`${label} cpu`, cpuMs(c));
            add(`${label} wall`, performance.now() - w);
            add(`${label} claimed`, summary.claimed);
            i++;
            if (summary.claimed === 0) break;
          }
          add('invocations', i);
          c = process.cpuUsage();
          await own.close();
          add('close', cpuMs(c));
        }),
      );
      const c = process.cpuUsage();
      await waitUntilDrained(url);
      add('check', cpuMs(c));
    },
  };
}

const allMakers: Record<string, () => BenchSystem> = {
  skiplock: () => skiplockSystem(500, 'keep'),
  'graphile-worker': () => graphileSystem(),
  ...(process.env.PROBE_SPLIT ? { 'skiplock-split': split } : {}),
};
const makers = process.env.PROBE_ONLY
  ? Object.fromEntries(process.env.PROBE_ONLY.split(',').map((n) => [n, allMakers[n] as () => BenchSystem]))
  : allMakers;
interface Run {
  cpu: number;
  wall: number;
  gc: Record<string, number>;
}
const runs: Record<string, Run[]> = {};

async function one(name: string, jobs: number, mode: string): Promise<void> {
  const system = (makers[name] as () => BenchSystem)();
  const url = await freshDatabase(server, DB);
  await system.setup(url);
  try {
    await system.enqueueBulk(jobs, 1000);
    await vacuumAnalyze(url);
    if (mode === 'gc') gc?.();
    done = 0;
    marks = [];
    console.log(`RUN START ${name} ${jobs} ${mode}`);
    const t = performance.now();
    const cpu0 = process.cpuUsage();
    await system.process(K);
    const cpu = cpuMs(cpu0);
    const t1 = performance.now();
    await new Promise((r) => setTimeout(r, 0)); // let the observer deliver
    const gcs: Record<string, number> = {};
    for (const p of pauses)
      if (p.start >= t && p.start < t1) {
        const kind = KIND[p.kind] ?? String(p.kind);
        gcs[`${kind} ms`] = (gcs[`${kind} ms`] ?? 0) + p.ms;
        gcs[`${kind} n`] = (gcs[`${kind} n`] ?? 0) + 1;
      }
    console.log(`RUN END ${name} ${jobs} ${mode}`);
    if (marks.length)
      console.log(
        `marks (cpu ms per ${MARK} jobs): ${marks.map((m, i) => (m - (marks[i - 1] ?? 0)).toFixed(1)).join(' ')}`,
      );
    const key = `${name} ${jobs} ${mode}`;
    runs[key] = [...(runs[key] ?? []), { cpu, wall: t1 - t, gc: gcs }];
  } finally {
    await system.teardown();
  }
}

const names = Object.keys(makers);
for (let t = 0; t < TRIALS; t++)
  for (const jobs of SIZES)
    for (const mode of MODES)
      for (const name of t % 2 === 0 ? names : [...names].reverse()) await one(name, jobs, mode);

console.log(`${TRIALS} trials, K = ${K}, jobs ${SIZES.join(' / ')}, modes ${MODES.join(' / ')}; medians`);
const f = (v: number) => v.toFixed(1);
for (const [key, list] of Object.entries(runs)) {
  const jobs = Number(key.split(' ').at(-2));
  const kinds = [...new Set(list.flatMap((r) => Object.keys(r.gc)))].sort();
  console.log(
    `${key.padEnd(34)} cpu ${f(median(list.map((r) => r.cpu)))} ms (${f((median(list.map((r) => r.cpu)) * 1000) / jobs)} µs/job) wall ${f(median(list.map((r) => r.wall)))} ms; gc ${kinds.map((k) => `${k} ${f(median(list.map((r) => r.gc[k] ?? 0)))}`).join(', ')}`,
  );
  console.log(`${''.padEnd(34)} every cpu: ${list.map((r) => f(r.cpu)).join(' ')}`);
}
if (SIZES.length >= 2) {
  const [j1, j2] = SIZES as [number, number];
  for (const name of names)
    for (const mode of MODES) {
      const c1 = median((runs[`${name} ${j1} ${mode}`] ?? []).map((r) => r.cpu));
      const c2 = median((runs[`${name} ${j2} ${mode}`] ?? []).map((r) => r.cpu));
      const perJob = (c2 - c1) / (j2 - j1);
      console.log(`${name} ${mode}: fixed ${f(c1 - j1 * perJob)} ms per run, marginal ${f(perJob * 1000)} µs per job`);
    }
}
for (const [key, v] of Object.entries(phases))
  console.log(
    `split ${key}: median ${f(median(v))}, n ${v.length}, sum/run ${f(v.reduce((a, b) => a + b, 0) / (TRIALS * SIZES.length * MODES.length))}`,
  );
await dropDatabase(server, DB);
process.exit(0);
