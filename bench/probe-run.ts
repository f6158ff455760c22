/**
 * Dev probe (issue 41): where a short processing run's time goes, against a long one.
 * `npx tsx bench/probe-run.ts [N] [K] [REPS] [SYSTEMS]` (10000, 16, 3, `skiplock,graphile,bench`).
 *
 * Each rep runs the bench's processing phase (bench/run.ts processRate: a fresh database, N jobs
 * enqueued, VACUUM ANALYZE, then the timed drain with K workers) for each system, alternating:
 * - `bench`: skiplock's bench system as bench/run.ts runs it (bench/systems/skiplock.ts);
 * - `skiplock`: the same loops, instrumented: for each loop, when each statement was sent and
 *   answered, its first and last job, and when it closed (the instrumentation's own cost is the
 *   difference to `bench`);
 * - `graphile`: graphile-worker's bench system.
 * For each run: the wall time and rate, Node's CPU (process.cpuUsage) and the Postgres server's CPU
 * (the postmaster's exited children, cutime + cstime, plus its live children: every backend, the
 * WAL writer and autovacuum included; 10 ms ticks). Run it at N = 10,000 and N = 50,000: what a
 * short run pays beyond a fifth of the long one is the fixed cost a long run amortises.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect, type SkiplockConnection } from '../db/connect.js';
import type { Executor } from '../db/executor.js';
import { renderSql } from '../db/render.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, waitUntilDrained } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10_000);
const K = Number(process.argv[3] ?? 16);
const REPS = Number(process.argv[4] ?? 3);
const SYSTEMS = (process.argv[5] ?? 'skiplock,graphile,bench').split(',');
const BATCH = 500;
const DB = 'bench_probe_run';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** The postmaster's pid: the parent of a backend. */
const postmaster = await (async () => {
  const c = new pg.Client({ connectionString: server });
  await c.connect();
  const pid = Number((await c.query('select pg_backend_pid() as pid')).rows[0].pid);
  const parent = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[1]);
  await c.end();
  return parent;
})();
/** Ticks (1/100 s) the server's processes have used: the exited children's and the live ones'. */
function serverTicks(): number {
  const fields = (pid: number) => {
    try {
      return (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ').map(Number);
    } catch {
      return []; // exited meanwhile: counted in the postmaster's cutime from now on
    }
  };
  const own = fields(postmaster);
  let ticks = (own[13] ?? 0) + (own[14] ?? 0); // cutime, cstime (fields 16 and 17)
  const children = readFileSync(`/proc/${postmaster}/task/${postmaster}/children`, 'utf8').trim().split(' ');
  for (const child of children) {
    const f = fields(Number(child));
    ticks += (f[11] ?? 0) + (f[12] ?? 0); // utime, stime (fields 14 and 15)
  }
  return ticks;
}

interface Figures {
  ms: number;
  rate: number;
  nodeMs: number;
  serverMs: number;
}

async function measured(run: () => Promise<void>): Promise<Figures> {
  const cpu0 = process.cpuUsage();
  const server0 = serverTicks();
  const t0 = performance.now();
  await run();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    ms: Math.round(ms),
    rate: Math.round(N / (ms / 1000)),
    nodeMs: Math.round((cpu.user + cpu.system) / 1000),
    serverMs: (serverTicks() - server0) * 10,
  };
}

/** Labels a statement by what it does. */
function label(text: string): string {
  if (text.includes('.invocations (worker, slot')) return 'reg';
  if (text.startsWith('delete from') && text.includes('invocations')) return 'unreg';
  if (text.includes('by_deadline')) return 'sweep';
  if (text.includes('claimed as'))
    return `claim${text.includes('settle_input') ? '+s' : ''}${text.includes('in_lane') ? '/l' : ''}`;
  return text.replace(/\s+/g, ' ').slice(0, 16);
}

interface Loop {
  events: string[];
  first?: number;
  last: number;
  jobs: number;
  closed: number;
}

/** bench/systems/skiplock.ts's process(k), each loop's statements and jobs timed from `t0`. */
async function instrumented(url: string, t0: number): Promise<Loop[]> {
  const at = () => Math.round(performance.now() - t0);
  const loops = await Promise.all(
    Array.from({ length: K }, async () => {
      const own = connect({ connectionString: url, max: 1 });
      const loop: Loop = { events: [], last: 0, jobs: 0, closed: 0 };
      const timed = (executor: Executor): Executor => {
        const wrap =
          <A extends unknown[]>(f: (...a: A) => Promise<unknown[]>) =>
          async (...a: A) => {
            const sent = at();
            const rows = await f(...a);
            loop.events.push(`${label(renderSql(a[0] as never).sql)} ${sent}-${at()}`);
            return rows;
          };
        return { ...executor, query: wrap(executor.query), hot: wrap(executor.hot) };
      };
      const db: SkiplockConnection = { ...own, executor: timed(own.executor) };
      const job = defineJob({
        kind: 'noop',
        payload: z.object({ n: z.number() }),
        handler: async () => {
          loop.first ??= at();
          loop.last = at();
          loop.jobs++;
        },
      });
      const worker = createWorker({
        db,
        jobs: [job],
        concurrency: BATCH,
        batchSize: BATCH,
        logger: silentLogger,
        maxInvocations: 64,
      });
      try {
        while (true) {
          const summary = await worker.runInvocation({ remainingMs: 600_000 });
          loop.events.push(`| ${at()}`);
          if (summary.stoppedBecause === 'error') throw new Error(`invocation failed: ${summary.error}`);
          if (summary.claimed === 0) break;
        }
      } finally {
        await own.close();
        loop.closed = at();
      }
      return loop;
    }),
  );
  await waitUntilDrained(url);
  return loops;
}

const makers: Record<string, () => BenchSystem> = {
  bench: () => skiplockSystem(BATCH),
  skiplock: () => skiplockSystem(BATCH),
  graphile: () => graphileSystem(),
};
const figures: Record<string, Figures[]> = {};
for (let rep = 0; rep < REPS; rep++) {
  const order = rep % 2 === 0 ? SYSTEMS : [...SYSTEMS].reverse();
  for (const name of order) {
    const system = (makers[name] as () => BenchSystem)();
    const url = await freshDatabase(server, DB);
    await system.setup(url);
    await system.enqueueBulk(N, 1000);
    await vacuumAnalyze(url);
    let loops: Loop[] = [];
    const t0 = performance.now();
    const f = await measured(async () => {
      if (name === 'skiplock') loops = await instrumented(url, t0);
      else await system.process(K);
    });
    await system.teardown();
    figures[name] = [...(figures[name] ?? []), f];
    console.log(`rep ${rep} ${name}: ${JSON.stringify(f)}`);
    if (process.env.PROBE_LOOPS !== '0')
      for (const l of loops)
        console.log(`  first ${l.first} last ${l.last} (${l.jobs}) closed ${l.closed}: ${l.events.join(', ')}`);
  }
}
console.log(`N=${N} K=${K}, medians of ${REPS}:`);
for (const [name, runs] of Object.entries(figures)) {
  const m = (key: keyof Figures) => median(runs.map((r) => r[key]));
  console.log(
    `  ${name}: ${m('rate')} jobs/s, ${m('ms')} ms, Node CPU ${m('nodeMs')} ms, server CPU ${m('serverMs')} ms`,
  );
}
await dropDatabase(server, DB);
process.exit(0);
