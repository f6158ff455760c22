/**
 * Dev probe (issue 41): where a short run at K loops spends its time, skiplock beside graphile-worker.
 * Under the lock:
 *   npx esbuild bench/probe-k-timeline.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-k-timeline.mjs --log-level=warning \
 *   && node .bench/probe-k-timeline.mjs [REPS] [K] [JOBS]   (3, 16, 10000)
 * PROBE_ONLY=skiplock,graphile,floor,graphile-apart (any of them) runs those systems (floor: the
 * minimal SQL on skiplock's table, bench/systems/raw-schema.ts, batch 500; graphile-apart: K runners,
 * below); PROBE_LOOPS=0 leaves out the per-loop lines;
 * PROBE_MARK=1 prints a line at each window's start and end, with process.hrtime in µs (to read beside
 * `node --trace-gc`, or to cut a `--cpu-prof` profile to the windows: its sample times share the clock);
 * PROBE_BACKEND=1 adds each loop's backend CPU at its first job and its invocations' ends; PROBE_WARM=1
 * (a diagnostic) gives each loop a connection already used by one invocation, opened before the window.
 *
 * Each rep runs, in alternating order, graphile-worker's process(K) (bench/systems/graphile.ts), the
 * floor's and the loop of bench/systems/skiplock.ts, instrumented, on a fresh database with JOBS jobs (as
 * processRate: enqueueBulk, vacuum analyze, the window). Per run: wall, Node CPU, and the server's
 * CPU over the window (every backend: live ones' /proc schedstat plus the postmaster's reaped
 * children's cutime + cstime). For skiplock also, per loop: its connection's first job, each
 * invocation's end and claims, its exit; the statements sent by kind (register, sweep, claim,
 * settle, unregister, other) and how many invocations claimed nothing; and the tail (the last job's
 * handler to the last loop's exit, then to the window's end).
 */
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { Logger, run as runGraphile } from 'graphile-worker';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { listenToStatements } from '../db/statement-listeners.js';
import { freshDatabase, vacuumAnalyze, waitUntilDrained, waitUntilZero } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REPS = Number(process.argv[2] ?? 3);
const K = Number(process.argv[3] ?? 16);
const JOBS = Number(process.argv[4] ?? 10_000);
const HZ = 100;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

/** Server CPU so far, ms: every postgres process's schedstat, plus what the postmaster reaped. */
function serverCpuMs(): number {
  let ns = 0;
  let postmaster = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== 'postgres') continue;
      ns += Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[1] === '1') postmaster += ((Number(fields[13]) + Number(fields[14])) / HZ) * 1000; // ppid 1: cutime, cstime
    } catch {
      // exited meanwhile
    }
  }
  return ns / 1e6 + postmaster;
}
const nodeMs = (since: NodeJS.CpuUsage) => {
  const c = process.cpuUsage(since);
  return (c.user + c.system) / 1000;
};

function kindOf(text: string): string {
  const t = text.replace(/\s+/g, ' ');
  if (t.includes('.invocations (worker, slot')) return 'register';
  if (t.startsWith('delete from') && t.includes('.invocations')) return 'unregister';
  if (t.includes('by_deadline as')) return 'sweep';
  if (t.includes('claim') || t.includes('for update skip locked')) return 'claim';
  if (t.includes('unnest')) return 'settle';
  return `other: ${t.slice(0, 50)}`;
}

interface Run {
  wall: number;
  node: number;
  server: number;
  detail?: string;
}

/**
 * PROBE_PERF_CTL=<fifo>: `enable` before each window and `disable` after it, for
 * `perf record -D -1 --control=fifo:<fifo> -a -- node .bench/probe-k-timeline.mjs …` (the windows only).
 */
const perfCtl = process.env.PROBE_PERF_CTL;
const perfSend = (cmd: string) => {
  if (perfCtl) appendFileSync(perfCtl, `${cmd}\n`);
};
async function windowed(fn: () => Promise<string | undefined>): Promise<Run> {
  perfSend('enable');
  if (process.env.PROBE_MARK) console.log(`--- window start ${process.hrtime.bigint() / 1000n}`);
  const s0 = serverCpuMs();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const detail = await fn();
  const run = { wall: performance.now() - t0, node: nodeMs(c0), server: serverCpuMs() - s0, detail };
  perfSend('disable');
  if (process.env.PROBE_MARK) console.log(`--- window end ${process.hrtime.bigint() / 1000n}`);
  return run;
}

/**
 * graphile-worker as K separate runners, each with its own pool of 3 and concurrency 1 (its local queue
 * of 500 as the bench's): K deployments of one worker, as K Lambdas would run it — the shape of
 * skiplock's K loops, where the bench's graphile-worker is one runner of concurrency K.
 */
function graphileApart(): BenchSystem {
  const base = graphileSystem();
  let url = '';
  const silent = new Logger(() => () => {});
  const worker = { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 };
  return {
    ...base,
    name: 'graphile-worker (K runners)',
    async setup(target) {
      url = target;
      await base.setup(target);
    },
    async process(k) {
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      const pools: pg.Pool[] = [];
      const runners = await Promise.all(
        Array.from({ length: k }, () => {
          const pool = new pg.Pool({ connectionString: url, max: 3 });
          pool.on('error', () => {});
          pools.push(pool);
          return runGraphile({
            pgPool: pool,
            concurrency: 1,
            noHandleSignals: true,
            pollInterval: 2000,
            logger: silent,
            taskList: { noop: async () => {} },
            preset: { worker },
          });
        }),
      );
      await waitUntilZero(async () =>
        Number((await check.query('select count(*) as n from graphile_worker._private_jobs')).rows[0].n),
      );
      for (const r of runners) await r.stop();
      for (const p of pools) await p.end();
      await check.end();
    },
  };
}

/** A peer (graphile-worker by default) or the floor: its process(K) in the window. */
async function systemRun(system: BenchSystem = graphileSystem()): Promise<Run> {
  const url = await freshDatabase(server, 'probe_k_timeline');
  await system.setup(url);
  await system.enqueueBulk(JOBS, 1000);
  await vacuumAnalyze(url);
  const run = await windowed(async () => {
    await system.process(K);
    return undefined;
  });
  await system.teardown();
  return run;
}

/** The bench's worker (bench/systems/skiplock.ts), its handler `onJob`. */
function benchWorker(db: ReturnType<typeof connect>, onJob: () => Promise<void>) {
  const job = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: onJob });
  return createWorker({ db, jobs: [job], concurrency: 500, batchSize: 500, logger: silentLogger, maxInvocations: 64 });
}

async function skiplockRun(): Promise<Run> {
  const system = skiplockSystem(500);
  const url = await freshDatabase(server, 'probe_k_timeline');
  await system.setup(url);
  // PROBE_WARM=1 (a diagnostic, not the bench's rule): each loop's connection is opened and used by one
  // invocation that claims one job before the jobs are enqueued, so the window holds no new backend.
  const warm: ReturnType<typeof connect>[] = [];
  if (process.env.PROBE_WARM) {
    for (let i = 0; i < K; i++) {
      const db = connect({ connectionString: url, max: 1 });
      await system.enqueueBulk(1, 1);
      await benchWorker(db, async () => {}).runInvocation({ remainingMs: 600_000 });
      warm.push(db);
    }
  }
  await system.enqueueBulk(JOBS, 1000);
  await vacuumAnalyze(url);
  const counts: Record<string, number> = {};
  let t0 = 0;
  const at = () => Math.round(performance.now() - t0);
  let lastJob = 0;
  const stop = listenToStatements((text) => {
    const k = kindOf(text);
    counts[k] = (counts[k] ?? 0) + 1;
  });
  let loops: { first?: number; jobs: number; ends: string[]; closed: number }[] = [];
  const run = await windowed(async () => {
    t0 = performance.now();
    loops = await Promise.all(
      Array.from({ length: K }, async (_, i) => {
        const own = warm[i] ?? connect({ connectionString: url, max: 1 });
        const loop: { first?: number; jobs: number; ends: string[]; closed: number } = { jobs: 0, ends: [], closed: 0 };
        // PROBE_BACKEND=1: the loop's backend CPU (ms) at its first job and at each invocation's end
        // (asking its pid is one more statement on the new connection, before the worker's first).
        const pid = process.env.PROBE_BACKEND
          ? Number(((await own.executor.query(sql`select pg_backend_pid() as pid`)) as { pid: number }[])[0]?.pid)
          : 0;
        const backendMs = () =>
          pid ? Math.round(Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e5) / 10 : 0;
        const atStart = backendMs();
        const worker = benchWorker(own, async () => {
          if (loop.first === undefined && pid)
            loop.ends.push(`[first job: backend ${backendMs()} ms, ${atStart} at connect]`);
          loop.first ??= at();
          lastJob = at();
          loop.jobs++;
        });
        while (true) {
          const s = performance.now();
          const summary = await worker.runInvocation({ remainingMs: 600_000 });
          loop.ends.push(
            `${summary.claimed}@${at()}(${Math.round(performance.now() - s)})${pid ? `[backend ${backendMs()}]` : ''}`,
          );
          if (summary.stoppedBecause === 'error') throw new Error(String(summary.error));
          if (summary.claimed === 0) break;
        }
        await own.close();
        loop.closed = at();
        return loop;
      }),
    );
    const exited = at();
    await waitUntilDrained(url);
    const firsts = loops.map((l) => l.first ?? -1).sort((a, b) => a - b);
    return [
      `first job per loop: min ${firsts[0]} median ${median(firsts)} max ${firsts[firsts.length - 1]}`,
      `last job ${lastJob}, last loop exit ${exited}, end ${at()}`,
      `statements ${JSON.stringify(counts)}`,
      ...(process.env.PROBE_LOOPS === '0' ? [] : loops).map(
        (l) => `  loop: first ${l.first} jobs ${l.jobs} invocations ${l.ends.join(' ')} closed ${l.closed}`,
      ),
    ].join('\n');
  });
  stop();
  await system.teardown();
  return run;
}

const rows: { sys: string; run: Run }[] = [];
for (let rep = 0; rep < REPS; rep++) {
  const systems = ['skiplock', 'graphile', 'floor', 'graphile-apart'];
  const order = rep % 2 === 0 ? systems : [...systems].reverse();
  for (const sys of order.filter((s) => !process.env.PROBE_ONLY || process.env.PROBE_ONLY.split(',').includes(s))) {
    const run =
      sys === 'skiplock'
        ? await skiplockRun()
        : sys === 'floor'
          ? await systemRun(rawSchemaSystem(500))
          : sys === 'graphile-apart'
            ? await systemRun(graphileApart())
            : await systemRun();
    rows.push({ sys, run });
    console.log(
      `rep ${rep} ${sys} K=${K} N=${JOBS}: ${Math.round(JOBS / (run.wall / 1000))} jobs/s, wall ${Math.round(run.wall)} ms, node ${Math.round(run.node)} ms, server ${Math.round(run.server)} ms`,
    );
    if (run.detail) console.log(run.detail);
  }
}
for (const sys of ['skiplock', 'graphile', 'floor', 'graphile-apart']) {
  const mine = rows.filter((r) => r.sys === sys).map((r) => r.run);
  console.log(
    `${sys}: median wall ${Math.round(median(mine.map((r) => r.wall)))} ms, node ${Math.round(median(mine.map((r) => r.node)))}, server ${Math.round(median(mine.map((r) => r.server)))}`,
  );
}
process.exit(0);
