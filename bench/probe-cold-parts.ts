/**
 * Dev probe (issue 41): what a new backend pays for each cold cache, in server CPU
 * (/proc/<pid>/schedstat). `npx tsx bench/probe-cold-parts.ts [TRIALS]`.
 *
 * On each trial's new connection, the steps below run in order, twice: the first time pays what the
 * backend loads (relation caches, the PL/pgSQL library, a function's compile and its first plans),
 * the second is the statement alone. Each step's cold figure leaves out what the steps above it
 * loaded: the PL/pgSQL library, for instance, is loaded once by whichever function runs first (the
 * trigger on jobs runs one on every update, so no claim avoids it). Medians over the trials.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { freshDatabase } from './db.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TRIALS = Number(process.argv[2] ?? 15);
const url = process.env.PROBE_URL ?? (await freshDatabase(server, 'coldconn_parts'));
if (!process.env.PROBE_URL) {
  const db = connect({ connectionString: url, max: 1 });
  await migrate(db);
  await db.close();
}
const cpuNs = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;

const steps: [string, string][] = [
  ['select 1', 'select 1'],
  ['set jit = off', 'set jit = off'],
  ['plan on jobs (relcache jobs+indexes)', 'explain select 1 from skiplock.jobs where id = 1'],
  ['plan on invocations', 'explain select 1 from skiplock.invocations where worker = $$x$$'],
  ['PL/pgSQL library (an empty DO block)', 'do $$begin end$$'],
  ['lapsed_leases()', `select skiplock.lapsed_leases(now(), '{noop}', 10)`],
  ['paused_names()', `select skiplock.paused_names('queue')`],
  ['claim_guard()', `select skiplock.claim_guard('{noop}', null, now(), true)`],
  [
    'update trigger (jobs_dependents)',
    `begin; update skiplock.jobs set updated_at = updated_at where id = -1; rollback`,
  ],
];
const cold = steps.map(() => [] as number[]);
const warm = steps.map(() => [] as number[]);
const connects: number[] = [];
for (let t = 0; t < TRIALS; t++) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const pid = Number((await client.query('select pg_backend_pid() as p')).rows[0].p);
  connects.push(cpuNs(pid) / 1e6);
  for (const into of [cold, warm]) {
    for (const [i, [, text]] of steps.entries()) {
      const before = cpuNs(pid);
      await client.query(text);
      into[i]?.push((cpuNs(pid) - before) / 1e6);
    }
  }
  await client.end();
}
console.log(`backend after connect + pg_backend_pid: ${median(connects).toFixed(2)} ms`);
for (const [i, [name]] of steps.entries()) {
  console.log(
    `${name.padEnd(40)} cold ${median(cold[i] ?? []).toFixed(2)} ms  warm ${median(warm[i] ?? []).toFixed(2)} ms`,
  );
}
process.exit(0);
