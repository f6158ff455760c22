/**
 * Dev probe (issue 41): the server CPU of an invocation's first statements on a new backend, two
 * trees side by side in one process (load-robust: trials alternate, medians).
 *
 * - `npx tsx bench/probe-cold-seq.ts dump DIR` (in each tree): runs one invocation of the bench's
 *   worker (batch 100) over 150 jobs and writes each statement it sends, with its parameters, to
 *   DIR/0.json, DIR/1.json, …, and whether it went as a hot statement.
 * - `npx tsx bench/probe-cold-seq.ts compare TRIALS DIR_A DIR_B [N]`: on a new connection per trial
 *   and tree, runs the first N (4: register, sweep, claim, claim with a settle) of each tree's
 *   statements as that tree sends them (a hot one as a named statement under the hot settings), each
 *   in a transaction rolled back, then again on the now warm connection. Prints the backend's CPU
 *   (/proc/<pid>/schedstat) for the sequence, new and warm, and per statement.
 *
 * Both use the database `coldconn_seq` (PROBE_SERVER's server), made by `dump`.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { HOT_PLANS } from '../db/drivers/pg-hot.js';
import type { Executor } from '../db/executor.js';
import { migrate } from '../db/migrate.js';
import { renderSql } from '../db/render.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const url = new URL(server);
url.pathname = '/coldconn_seq';
const cpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
const [mode, ...args] = process.argv.slice(2);

if (mode === 'dump') {
  const dir = args[0] ?? 'coldconn-seq';
  mkdirSync(dir, { recursive: true });
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  const exists = (await admin.query(`select 1 from pg_database where datname = 'coldconn_seq'`)).rowCount;
  if (!exists) await admin.query('create database coldconn_seq');
  await admin.end();
  const db = connect({ connectionString: url.toString(), max: 1 });
  await migrate(db);
  const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
  await createEnqueuer().enqueueMany(
    db,
    Array.from({ length: 150 }, (_, n) => noop.with({ n })),
  );
  let i = 0;
  const inner = db.executor;
  const write = (statement: Parameters<Executor['query']>[0], hot: boolean) => {
    const { sql, params } = renderSql(statement);
    writeFileSync(`${dir}/${i++}.json`, JSON.stringify({ hot, text: sql, values: params }));
  };
  (db as { executor: Executor }).executor = {
    ...inner,
    query: (statement) => {
      write(statement, false);
      return inner.query(statement);
    },
    hot: (statement, hint) => {
      write(statement, true);
      return inner.hot(statement, hint);
    },
  };
  const worker = createWorker({
    db,
    jobs: [noop],
    concurrency: 100,
    batchSize: 100,
    logger: silentLogger,
    maxInvocations: 64,
  });
  await worker.runInvocation({ remainingMs: 600_000 });
  await db.close();
  console.log(`${i} statements written to ${dir}`);
  process.exit(0);
}

const trials = Number(args[0] ?? 30);
const dirs = [args[1] ?? 'a', args[2] ?? 'b'];
const count = Number(args[3] ?? 4);
type Sent = { hot: boolean; text: string; values: unknown[] };
const sequences = dirs.map((dir) =>
  Array.from({ length: count }, (_, i) => JSON.parse(readFileSync(`${dir}/${i}.json`, 'utf8')) as Sent),
);
const results = dirs.map(() => ({ cold: [] as number[], warm: [] as number[], each: [] as number[][] }));
for (let t = 0; t < trials; t++) {
  for (const side of t % 2 === 0 ? [0, 1] : [1, 0]) {
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    const pid = Number((await client.query('select pg_backend_pid() as pid')).rows[0].pid);
    for (const round of [0, 1]) {
      const each: number[] = [];
      for (const statement of sequences[side] ?? []) {
        await client.query(statement.hot ? HOT_PLANS : 'begin');
        const before = cpuNs(pid);
        await client.query({
          // Named by text, as the driver names them (db/drivers/pg-pool.ts): a text sent again is not parsed again.
          ...(statement.hot ? { name: `s${sequences[side]?.findIndex((s) => s.text === statement.text)}` } : {}),
          text: statement.text,
          values: statement.values,
        });
        each.push((cpuNs(pid) - before) / 1e6);
        await client.query('rollback');
      }
      const total = each.reduce((a, b) => a + b, 0);
      const into = results[side];
      if (round === 0) {
        into?.cold.push(total);
        into?.each.push(each);
      } else into?.warm.push(total);
    }
    await client.end();
  }
}
console.log(`${trials} trials each, the first ${count} statements, server CPU ms (medians)`);
for (const [side, dir] of dirs.entries()) {
  const r = results[side];
  if (!r) continue;
  const each = Array.from({ length: count }, (_, i) => median(r.each.map((e) => e[i] ?? 0)).toFixed(2));
  console.log(
    `${dir}: new connection ${median(r.cold).toFixed(2)}, warm ${median(r.warm).toFixed(2)}; each on the new one: ${each.join(' / ')}`,
  );
}
process.exit(0);
