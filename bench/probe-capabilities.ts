/**
 * Dev probe: what the checks for capabilities no job uses cost the steady-state statement
 * (`node .bench/probe-capabilities.mjs`). It captures the claim-and-settle statement claimJobs sends
 * (500 completions settled, 500 claimed, 20,000 plain jobs), cuts one check at a time out of its
 * text — keeping its parameters, so the rest plans alike — and prints the median planning and
 * execution time of 30 EXPLAIN (ANALYZE, SUMMARY) runs of each, rolled back (PROBE_PLAN=name prints
 * the first plan of the variants whose name starts with it).
 */
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { executorOf } from '../db/executor-of.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const url = await freshDatabase('postgres://postgres@127.0.0.1:5432/postgres', 'bench_probe');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const enqueuer = createEnqueuer();
for (let i = 0; i < 20; i++)
  await enqueuer.enqueueMany(
    db,
    Array.from({ length: 1000 }, (_, n) => noop.with({ n })),
  );
await vacuumAnalyze(url);
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
const first = await claimJobs(db.executor, 'skiplock', { leases, limit: 500, invocationId: 'probe' });

// The statement as the driver receives it.
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const send = proto.query;
let statement = { text: '', values: [] as unknown[] };
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as { text?: string; values?: unknown[] };
  if (typeof q === 'object' && q?.text?.includes('ready as'))
    statement = { text: q.text, values: q.values ?? (args[1] as unknown[]) ?? [] };
  return send.apply(this, args);
};
const settle = first.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
await db.db
  .transaction(async (tx) => {
    await claimJobs(executorOf(tx), 'skiplock', { leases, limit: 500, invocationId: 'probe', settle });
    tx.rollback();
  })
  .catch(() => {});
proto.query = send;

/** The text from `start` to the end of the first `end` after it (inclusive), or a throw. */
function span(text: string, start: string, end: string): string {
  const from = text.indexOf(start);
  const to = from < 0 ? -1 : text.indexOf(end, from);
  if (to < 0) throw new Error(`the statement no longer has ${JSON.stringify(start)}`);
  return text.slice(from, to + end.length);
}
const paramsIn = (text: string) => [...new Set(text.match(/\$[0-9]+(::[a-z]+(\[\])?)?/g) ?? [])];
/** A condition that is true and names the cut text's parameters, so their types stay known. */
const keep = (cut: string) =>
  paramsIn(cut)
    .map((p) => `${p.includes('::') ? p : `${p}::text`} is not null`)
    .join(' and ') || 'true';

const text = statement.text;
const shape = span(text, 'shape as (select', 'as ordered),');
const pausesBoth =
  span(text, "and (j.queue || '') <> all(", "(j.kind || '') <> all(") +
  span(text, "(j.kind || '') <> all(", "'{}'::text[]))").slice("(j.kind || '') <> all(".length);
const parents = span(text, 'and (j.after is null or not exists (', "('dead', 'cancelled')))))");
const expired = span(text, 'expired as (', 'for update skip locked\n    ),');
const variants: [string, [string, string][]][] = [
  ['as sent', []],
  [
    'without the shape check (limits, rates, keyed jobs, breakers, ordering keys)',
    [[shape, `shape as (select (${keep(shape)}) is null as needed, false as rated, false as ordered),`]],
  ],
  ['without the pauses (head)', [[pausesBoth, `and ${keep(pausesBoth)}`]]],
  ['without the parents check (dependencies)', [[parents, `and ${keep(parents)}`]]],
  [
    'without the rescue of lapsed leases',
    [[expired, `expired as (select null::bigint as id where ${keep(expired)} is null),`]],
  ],
];
variants.push(['without all four', variants.slice(1).flatMap(([, cuts]) => cuts)]);

const admin = new pg.Client({ connectionString: url });
await admin.connect();
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const texts = variants.map(([, cuts]) => cuts.reduce((t, [from, to]) => t.split(from).join(to), text));
const planning = variants.map((): number[] => []);
const execution = variants.map((): number[] => []);
// Round robin, so that the machine's drift falls on every variant alike.
for (let round = 0; round < 30; round++) {
  // Each run leaves 1,000 rolled-back row versions: vacuumed away, so no run pays for another's.
  await admin.query('vacuum skiplock.jobs');
  for (const [v, variant] of texts.entries()) {
    await admin.query('begin');
    const { rows } = await admin.query(`explain (analyze, summary, timing off) ${variant}`, statement.values);
    await admin.query('rollback');
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    const name = variants[v]?.[0] ?? '';
    if (process.env.PROBE_PLAN && name.startsWith(process.env.PROBE_PLAN) && round === 0) console.log(plan);
    planning[v]?.push(Number(/Planning Time: ([0-9.]+)/.exec(plan)?.[1]));
    execution[v]?.push(Number(/Execution Time: ([0-9.]+)/.exec(plan)?.[1]));
  }
}
for (const [v, [name]] of variants.entries()) {
  console.log(
    `${name}: planning ${median(planning[v] ?? []).toFixed(3)} ms, execution ${median(execution[v] ?? []).toFixed(3)} ms`,
  );
}
await admin.end();
await db.close();
process.exit(0);
