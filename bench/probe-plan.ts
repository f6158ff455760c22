/**
 * Dev probe: parse + plan cost of the claim statement (`node .bench/probe-plan.mjs`): EXPLAIN
 * (SUMMARY) of the statement claimJobs sends, with and without a batch to settle, on one connection.
 */
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const url = await freshDatabase(server, 'bench_probe_plan');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
await createEnqueuer().enqueueMany(
  db,
  Array.from({ length: 5000 }, (_, n) => noop.with({ n })),
);
await vacuumAnalyze(url);
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
// Capture the statement text and parameters claimJobs sends.
type Statement = { text: string; values: unknown[] };
/** One row of EXPLAIN's text output. */
type PlanLine = { 'QUERY PLAN': string };
const captured: Statement[] = [];
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as { text?: string; values?: unknown[] };
  if (typeof q === 'object' && q?.text?.includes('ready as'))
    captured.push({ text: q.text, values: q.values ?? (args[1] as unknown[]) ?? [] });
  return original.apply(this, args);
};
const first = await claimJobs(db.executor, 'skiplock', { leases, limit: 10, invocationId: 'probe' });
const settle = first.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
await claimJobs(db.executor, 'skiplock', { leases, limit: 10, invocationId: 'probe', settle });
proto.query = original;
const client = new pg.Client({ connectionString: url });
await client.connect();
const stripped = (q: Statement | undefined): Statement | undefined =>
  q && { text: q.text.replace(/--[^\n]*/g, ''), values: q.values };
const noClock = (q: Statement | undefined): Statement | undefined =>
  q && {
    text: q.text
      .replace(
        /with clock as \(select n\.now, \(extract\(epoch from n\.now\) \* 1000\)::float8 as now_ms\s*from \(select clock_timestamp\(\) as now\) n\),/,
        'with ',
      )
      .replaceAll('(select now from clock)', 'statement_timestamp()')
      .replaceAll('(select now_ms from clock)', '(extract(epoch from statement_timestamp()) * 1000)::float8'),
    values: q.values,
  };
const probes: [label: string, statement: Statement | undefined][] = [
  ['select 1', { text: 'select 1', values: [] }],
  ['claim alone', captured[0]],
  ['claim + settle of 10', captured[1]],
  ['claim alone, no comments', stripped(captured[0])],
  ['claim alone, statement_timestamp()', noClock(captured[0])],
  ['claim + settle, statement_timestamp()', noClock(captured[1])],
];
for (const [label, q] of probes) {
  if (!q) continue;
  const planning: number[] = [];
  const roundTrip: number[] = [];
  for (let i = 0; i < 100; i++) {
    const t = performance.now();
    const { rows } = await client.query<PlanLine>(`explain (summary) ${q.text}`, q.values);
    roundTrip.push(performance.now() - t);
    const line = rows.map((r) => r['QUERY PLAN']).find((l) => l.startsWith('Planning Time'));
    planning.push(Number(line?.match(/([\d.]+) ms/)?.[1]));
  }
  const prepare: number[] = [];
  for (let i = 0; i < 100; i++) {
    const t = performance.now();
    await client.query(`prepare probe_statement as ${q.text}`);
    prepare.push(performance.now() - t);
    await client.query('deallocate probe_statement');
  }
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1] as number;
  console.log(
    `${label}: planning ${median(planning).toFixed(3)} ms, explain round trip ${median(roundTrip).toFixed(3)} ms, PREPARE (parse + analyse) round trip ${median(prepare).toFixed(3)} ms, ${q.text.length} chars`,
  );
}
if (process.env.PROBE_ANALYZE && captured[1]) {
  // One execution of the claim + settle statement, analysed, then rolled back.
  await client.query('begin');
  const { rows } = await client.query<PlanLine>(
    `explain (analyze, buffers, summary) ${captured[1].text}`,
    captured[1].values,
  );
  await client.query('rollback');
  console.log(rows.map((r) => r['QUERY PLAN']).join('\n'));
}
await client.end();
await db.close();
