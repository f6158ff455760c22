/**
 * Dev probe (issue 41): the fixed cost of a bench loop's new connection, in CPU.
 * `npx tsx bench/probe-cold-loop.ts [TRIALS] [JOBS] [BATCH]` (15, 1000, 100).
 *
 * Each trial enqueues JOBS no-op jobs and drains them with one bench loop (bench/systems/skiplock.ts:
 * invocations until one claims nothing) on a NEW connection, then enqueues JOBS again and drains
 * them with a new worker on the same, now WARM connection. The server backend's CPU
 * (/proc/<pid>/schedstat) and Node's (process.cpuUsage) over each loop, and statements sent; the
 * difference new − warm is what a new connection costs. Medians over the trials after the first.
 * PROBE_EACH=1: each statement's server CPU, new and warm. PROBE_SETUP_SQL_B: a second database with
 * these statements run after its migrations (a schema experiment), trials alternating A and B.
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect, type SkiplockConnection } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { listenToStatements } from '../db/statement-listeners.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TRIALS = Number(process.argv[2] ?? 15);
const JOBS = Number(process.argv[3] ?? 1000);
const BATCH = Number(process.argv[4] ?? 100);
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const enqueuer = createEnqueuer();
const cpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

async function database(name: string, setup?: string) {
  const url = await freshDatabase(server, name);
  const admin = connect({ connectionString: url, max: 1 });
  await migrate(admin);
  if (setup) await admin.executor.query(sql.raw(setup));
  const enqueue = async () => {
    for (let i = 0; i < JOBS; i += 1000)
      await enqueuer.enqueueMany(
        admin,
        Array.from({ length: Math.min(1000, JOBS - i) }, (_, j) => noop.with({ n: i + j })),
      );
  };
  await enqueue();
  await vacuumAnalyze(url);
  return { url, admin, enqueue, rows: [] as Trial[] };
}

interface Loop {
  server: number;
  node: number;
  statements: number;
  each: { text: string; server: number }[];
}
interface Trial {
  fresh: Loop;
  warm: Loop;
  backend: number;
}

async function loop(db: SkiplockConnection, pid: number): Promise<Loop> {
  const worker = createWorker({
    db,
    jobs: [noop],
    concurrency: BATCH,
    batchSize: BATCH,
    logger: silentLogger,
    completedJobs: 'keep',
    maxInvocations: 64,
  });
  const each: Loop['each'] = [];
  let at = cpuNs(pid);
  const stop = listenToStatements((text) => {
    const now = cpuNs(pid);
    const last = each.at(-1);
    if (last) last.server = (now - at) / 1e6;
    at = now;
    each.push({ text: text.replace(/\s+/g, ' ').slice(0, 70), server: 0 });
  });
  const s0 = cpuNs(pid);
  const n0 = process.cpuUsage();
  while (true) {
    const summary = await worker.runInvocation({ remainingMs: 600_000 });
    if (summary.stoppedBecause === 'error') throw new Error(String(summary.error));
    if (summary.claimed === 0) break;
  }
  const n = process.cpuUsage(n0);
  const last = each.at(-1);
  if (last) last.server = (cpuNs(pid) - at) / 1e6;
  stop();
  return { server: (cpuNs(pid) - s0) / 1e6, node: (n.user + n.system) / 1000, statements: each.length, each };
}

async function trial(target: Awaited<ReturnType<typeof database>>, t: number): Promise<void> {
  const app = `coldloop_${t}`;
  const db = connect({ connectionString: `${target.url}?application_name=${app}`, max: 1 });
  // The backend's pid from another connection, so the loop's own connection sends nothing more.
  const opening = db.executor.query(sql`select 1`);
  let pid = 0;
  while (!pid) {
    const r = (await target.admin.executor.query(
      sql`select pid from pg_stat_activity where application_name = ${app} and datname = current_database()`,
    )) as { pid: number }[];
    pid = Number(r[0]?.pid ?? 0);
  }
  await opening;
  const backend = cpuNs(pid) / 1e6;
  const fresh = await loop(db, pid);
  await target.enqueue();
  const warm = await loop(db, pid);
  await target.enqueue();
  await db.close();
  target.rows.push({ fresh, warm, backend });
}

const targets = [await database(process.env.PROBE_DB ?? 'coldconn_loop')];
if (process.env.PROBE_SETUP_SQL_B)
  targets.push(await database(`${process.env.PROBE_DB ?? 'coldconn_loop'}_b`, process.env.PROBE_SETUP_SQL_B));
for (let t = 0; t < TRIALS; t++) for (const target of targets) await trial(target, t);

console.log(`${TRIALS} trials, ${JOBS} jobs a loop, batch ${BATCH}`);
for (const [i, target] of targets.entries()) {
  const later = target.rows.slice(1);
  const m = (f: (r: Trial) => number) => median(later.map(f)).toFixed(2);
  console.log(`${targets.length > 1 ? (i === 0 ? 'A' : 'B (PROBE_SETUP_SQL_B)') : ''}`);
  console.log(`  backend start (fork, auth, settings, one select): server ${m((r) => r.backend)} ms`);
  console.log(
    `  new connection loop: server ${m((r) => r.fresh.server)} ms, node ${m((r) => r.fresh.node)} ms, statements ${m((r) => r.fresh.statements)}`,
  );
  console.log(
    `  warm connection loop: server ${m((r) => r.warm.server)} ms, node ${m((r) => r.warm.node)} ms, statements ${m((r) => r.warm.statements)}`,
  );
  console.log(
    `  new − warm: server ${m((r) => r.fresh.server - r.warm.server)} ms, node ${m((r) => r.fresh.node - r.warm.node)} ms; with the backend start: server ${m((r) => r.backend + r.fresh.server - r.warm.server)} ms`,
  );
  // The statements up to the first claim with a settle: where the new connection's cold caches and
  // first plans are paid, without the noise of the batches after them.
  const firstFour = (loop: Loop) => loop.each.slice(0, 4).reduce((sum, e) => sum + e.server, 0);
  console.log(
    `  first 4 statements, new − warm: server ${m((r) => firstFour(r.fresh) - firstFour(r.warm))} ms (new ${m((r) => firstFour(r.fresh))}, warm ${m((r) => firstFour(r.warm))})`,
  );
  if (process.env.PROBE_EACH)
    for (const [j, s] of (later[0]?.fresh.each ?? []).entries()) {
      const f = median(later.map((r) => r.fresh.each[j]?.server ?? 0));
      const w = median(later.map((r) => r.warm.each[j]?.server ?? 0));
      console.log(`    ${f.toFixed(2).padStart(6)} ${w.toFixed(2).padStart(6)}  ${s.text}`);
    }
}
for (const target of targets) await target.admin.close();
process.exit(0);
