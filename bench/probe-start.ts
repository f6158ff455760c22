/**
 * Dev probe: the fixed cost of an invocation (issue 41), from its start to its first claimed job.
 * `npx tsx bench/probe-start.ts [TRIALS] [BATCH]` (5 and 500 by default: the bench's worker).
 *
 * Each trial opens a new connection and a new worker, as each of the bench's K loops does, and runs
 * one invocation (drain off: one batch) until its handler first runs. It reports, per trial and as
 * medians over the trials after the first (the first also pays for the process's cold JavaScript):
 * - the milliseconds to the first claimed job, and each statement sent before it (as listened to at
 *   the Executor, db/statement-listeners.ts), with when it was sent;
 * - Node's CPU over that time (process.cpuUsage) and the server backend's (its /proc/<pid>/schedstat,
 *   nanoseconds on the CPU: both hold on a loaded machine, unlike the wall time);
 * - the same for a second invocation on the now warm connection (what the connection's first use
 *   costs is the difference), and for an invocation that finds the queue empty (each bench loop ends
 *   with one), on a new connection and on a warm one.
 * Then, on a fresh connection, EXPLAIN (ANALYZE, SUMMARY) of each statement the first invocation
 * sent (in a transaction rolled back), twice: the first pays the new backend's catalog caches, the
 * second is the planning and execution alone.
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect, type SkiplockConnection } from '../db/connect.js';
import type { Executor } from '../db/executor.js';
import { renderSql } from '../db/render.js';
import { listenToStatements } from '../db/statement-listeners.js';
import { startCpuProfile } from './cpu-profile.js';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const timeline = process.argv[2] === 'phase';
const TRIALS = timeline ? 0 : Number(process.argv[2] ?? 5);
const BATCH = Number(process.argv[3] ?? 500);

/** Nanoseconds a process has run on a CPU (Linux's schedstat): what the server backend spent. */
const cpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const nodeCpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

if (timeline) {
  await phaseTimeline(Number(process.argv[3] ?? 10_000), Number(process.argv[4] ?? 4), Number(process.argv[5] ?? 3));
  process.exit(0);
}
const url = await freshDatabase(server, 'bench_probe_start');
const monitor = new pg.Client({ connectionString: url });
await monitor.connect();
const pidOf = async (app: string): Promise<number> =>
  Number(
    (await monitor.query('select pid from pg_stat_activity where application_name = $1', [app])).rows[0]?.pid ?? 0,
  );

const system = skiplockSystem(BATCH);
await system.setup(url);
await system.enqueueBulk(BATCH * (2 * TRIALS + 2), 1000);
await vacuumAnalyze(url);

interface Start {
  ms: number;
  nodeCpuMs: number;
  serverCpuMs: number;
  /** Each statement sent before the first job: when, and the server CPU (ms) of what ran before it. */
  statements: { atMs: number; serverMs: number; text: string }[];
}

/** The bench's worker (bench/systems/skiplock.ts) on `db`; one batch per invocation unless `drain`. */
function benchWorker(db: SkiplockConnection, onJob: () => Promise<void>, drain = false) {
  const job = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: onJob });
  return createWorker({
    db,
    jobs: [job],
    concurrency: BATCH,
    batchSize: BATCH,
    logger: silentLogger,
    maxInvocations: 64,
    drain,
    flushIntervalMs: 60_000, // nothing is written while the first handler waits for the probe
  });
}

/**
 * Runs one invocation of `worker` and measures it up to its first job. `pid`: the backend, when the
 * connection is already open; else it is looked up (by application name) as the first job starts.
 */
async function measure(
  run: (onFirst: () => Promise<void>) => Promise<unknown>,
  backend: { app: string; pid?: number },
): Promise<Start> {
  const statements: Start['statements'] = [];
  let done = false;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const server0 = backend.pid ? cpuNs(backend.pid) : 0;
  let serverAt = server0;
  const stop = listenToStatements((text) => {
    if (done) return;
    const now = backend.pid ? cpuNs(backend.pid) : 0;
    const serverMs = round((now - serverAt) / 1e6, 2);
    serverAt = now;
    statements.push({ atMs: round(performance.now() - t0), serverMs, text: text.replace(/\s+/g, ' ').slice(0, 60) });
  });
  let result: Omit<Start, 'statements'> | undefined;
  await run(async () => {
    const ms = performance.now() - t0;
    const node = nodeCpuMs(cpu0);
    done = true;
    const known = backend.pid !== undefined;
    backend.pid ??= await pidOf(backend.app);
    if (known)
      statements.push({
        atMs: round(ms),
        serverMs: round((cpuNs(backend.pid) - serverAt) / 1e6, 2),
        text: '(first job)',
      });
    result = { ms: round(ms), nodeCpuMs: round(node), serverCpuMs: round((cpuNs(backend.pid) - server0) / 1e6) };
  });
  stop();
  return { ...(result ?? { ms: Number.NaN, nodeCpuMs: Number.NaN, serverCpuMs: Number.NaN }), statements };
}

const fresh: Start[] = [];
const opened: Start[] = [];
const warm: Start[] = [];
/** Opening a connection (fork, authentication, `set jit = off`, a `select`): ms and server CPU ms. */
const connects: { ms: number; serverCpuMs: number }[] = [];
// PROBE_PROF=<file>: a V8 CPU profile of the trials (not the setup).
const stopProfile = await startCpuProfile();
for (let trial = 0; trial < TRIALS; trial++) {
  const app = `probe_start_${trial}`;
  const backend: { app: string; pid?: number } = { app };
  const db = connect({ connectionString: `${url}?application_name=${app}`, max: 1 });
  const openedApp = `${app}_opened`;
  const openedDb = connect({ connectionString: `${url}?application_name=${openedApp}`, max: 1 });
  const t = performance.now();
  const [row] = (await openedDb.executor.query(sql`select pg_backend_pid() as pid`)) as { pid: number }[];
  const pid = Number(row?.pid);
  connects.push({ ms: round(performance.now() - t), serverCpuMs: round(cpuNs(pid) / 1e6) });
  try {
    for (const [into, on, where] of [
      [fresh, db, backend],
      [opened, openedDb, { app: openedApp, pid }],
      [warm, db, backend],
    ] as const) {
      let first: (() => Promise<void>) | undefined;
      const worker = benchWorker(on, async () => {
        const f = first;
        first = undefined;
        if (f) await f();
      });
      into.push(
        await measure(async (onFirst) => {
          first = onFirst;
          await worker.runInvocation({ remainingMs: 600_000 });
        }, where),
      );
    }
  } finally {
    await db.close();
    await openedDb.close();
  }
}

await stopProfile();
const show = (label: string, starts: Start[]) => {
  const later = starts.length > 1 ? starts.slice(1) : starts;
  console.log(
    `${label}: to first job ${median(later.map((s) => s.ms))} ms (first in process ${starts[0]?.ms}); ` +
      `node CPU ${median(later.map((s) => s.nodeCpuMs))} ms (first ${starts[0]?.nodeCpuMs}); ` +
      `server CPU ${median(later.map((s) => s.serverCpuMs))} ms (first ${starts[0]?.serverCpuMs}); ` +
      `statements before it ${median(later.map((s) => s.statements.filter((t) => t.text !== '(first job)').length))}`,
  );
};
console.log(`${TRIALS} trials, batch ${BATCH}`);
const lines = (starts: Start[]) => {
  for (const s of starts[1]?.statements ?? [])
    console.log(`    +${s.atMs} ms, server ${s.serverMs} ms before it  ${s.text}`);
};
const later = connects.slice(1);
console.log(
  `opening a connection: ${median(later.map((c) => c.ms))} ms, server CPU ${median(later.map((c) => c.serverCpuMs))} ms`,
);
show('new connection', fresh);
lines(fresh);
show('new connection, opened beforehand', opened);
lines(opened);
show('warm connection', warm);
lines(warm);

// The invocation that ends each bench loop: it finds the queue empty.
await monitor.query(`update skiplock.jobs set state = 'completed', finished_at = now() where state = 'queued'`);
{
  const app = 'probe_start_empty';
  const db = connect({ connectionString: `${url}?application_name=${app}`, max: 1 });
  const worker = benchWorker(db, async () => {}, true); // the bench's loops drain
  const backend: { app: string; pid?: number } = { app };
  for (const label of ['empty, new connection', 'empty, warm connection']) {
    const statements: string[] = [];
    const stop = listenToStatements((text) => statements.push(text.replace(/\s+/g, ' ').slice(0, 50)));
    const server0 = backend.pid ? cpuNs(backend.pid) : 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await worker.runInvocation({ remainingMs: 600_000 });
    const ms = performance.now() - t0;
    const node = nodeCpuMs(cpu0);
    stop();
    backend.pid ??= await pidOf(app);
    console.log(
      `${label}: ${round(ms)} ms, node CPU ${round(node)} ms, server CPU ${round((cpuNs(backend.pid) - server0) / 1e6)} ms, ` +
        `${statements.length} statements: ${statements.map((s) => s.slice(0, 24)).join(' | ')}`,
    );
  }
  await db.close();
}

// Server side: each statement of a first invocation, explained on a fresh connection.
await monitor.query(`update skiplock.jobs set state = 'queued', finished_at = null where state = 'completed'`);
await vacuumAnalyze(url);
const sent: { sql: string; params: unknown[] }[] = [];
{
  const db = connect({ connectionString: url, max: 1 });
  const record = (executor: Executor): Executor => ({
    ...executor,
    query: (statement) => {
      sent.push(renderSql(statement));
      return executor.query(statement);
    },
    hot: (statement, hint) => {
      sent.push(renderSql(statement));
      return executor.hot(statement, hint);
    },
  });
  const worker = benchWorker({ ...db, executor: record(db.executor) }, async () => {});
  await worker.runInvocation({ remainingMs: 600_000 });
  await db.close();
}
const explainer = new pg.Client({ connectionString: url });
await explainer.connect();
const pid = Number((await explainer.query('select pg_backend_pid() as pid')).rows[0].pid);
console.log('EXPLAIN (ANALYZE, SUMMARY) on a fresh connection, planning / execution / backend CPU ms:');
for (const pass of ['cold', 'warm']) {
  for (const statement of sent) {
    await explainer.query('begin');
    const before = cpuNs(pid);
    const plan = (
      await explainer.query(`explain (analyze, summary, format json) ${statement.sql}`, statement.params as unknown[])
    ).rows[0]['QUERY PLAN'][0] as { 'Planning Time': number; 'Execution Time': number };
    const used = (cpuNs(pid) - before) / 1e6;
    await explainer.query('rollback');
    console.log(
      `  ${pass}: ${round(plan['Planning Time'], 2)} / ${round(plan['Execution Time'], 2)} / ${round(used, 2)}  ${statement.sql.replace(/\s+/g, ' ').slice(0, 60)}`,
    );
  }
}
await explainer.end();
await monitor.end();
await system.teardown();
process.exit(0);

/**
 * `phase N K REPS`: the bench's processing phase for skiplock (bench/systems/skiplock.ts's loops, the
 * same worker), with when each loop claimed its first job and ran its last, when its invocations
 * ended, and when the count of unfinished jobs read zero: where a short run's time goes.
 */
async function phaseTimeline(n: number, k: number, reps: number): Promise<void> {
  for (let rep = 0; rep < reps; rep++) {
    const url = await freshDatabase(server, 'bench_probe_start');
    const system = skiplockSystem(500);
    await system.setup(url);
    await system.enqueueBulk(n, 1000);
    await vacuumAnalyze(url);
    const t0 = performance.now();
    const at = () => Math.round(performance.now() - t0);
    const loops = await Promise.all(
      Array.from({ length: k }, async () => {
        const own = connect({ connectionString: url, max: 1 });
        let first: number | undefined;
        let last = 0;
        let jobs = 0;
        const job = defineJob({
          kind: 'noop',
          payload: z.object({ n: z.number() }),
          handler: async () => {
            first ??= at();
            last = at();
            jobs++;
          },
        });
        const worker = createWorker({
          db: own,
          jobs: [job],
          concurrency: 500,
          batchSize: 500,
          logger: silentLogger,
          maxInvocations: 64,
        });
        const ends: number[] = [];
        while (true) {
          const summary = await worker.runInvocation({ remainingMs: 600_000 });
          ends.push(at());
          if (summary.claimed === 0) break;
        }
        await own.close();
        return { first, last, jobs, ends, closed: at() };
      }),
    );
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const counted = Number(
      (await check.query(`select count(*) as n from skiplock.jobs where state in ('queued', 'running')`)).rows[0].n,
    );
    const total = at();
    await check.end();
    await system.teardown();
    console.log(
      `N=${n} K=${k}: ${Math.round(n / (total / 1000))} jobs/s, ${total} ms (left ${counted}); per loop first job / last job / invocation ends / closed:`,
    );
    for (const l of loops)
      console.log(`  ${l.first} / ${l.last} (${l.jobs} jobs) / ${l.ends.join(', ')} / ${l.closed}`);
  }
}
