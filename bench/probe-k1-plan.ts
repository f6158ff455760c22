/**
 * Dev probe (issue 41): the server's side of K = 1's two statements, as the worker sends them at
 * batches of 500 (a claim of 500 with an empty settle; a lone settle of 1,000 completions), against
 * the schema floor's claim and completion. Under the lock:
 *   npx esbuild bench/probe-k1-plan.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-k1-plan.mjs --log-level=warning \
 *   && node .bench/probe-k1-plan.mjs [REPS] [PLAN]   (REPS 7; PLAN 1 prints one EXPLAIN (ANALYZE, BUFFERS) of each)
 * PROBE_VARIANTS='label@@regex=>replacement;…' also runs variants of the claim's text (of the claim with a
 * settle of 500 with PROBE_ON=both, of the lone settle with PROBE_ON=settle), same parameters. PROBE_TEXTS=1 prints the captured texts.
 *
 * The hot statements are captured from what the driver would send (their Parse and Bind) and not
 * sent; each is then run as a named statement under the hot transaction's settings (generic plan, no
 * sequential scans), in BEGIN … ROLLBACK, REPS times on a table of 50,000 queued jobs (1,000 of them
 * running, the settle's). Prints the median execution time per statement and per job.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { settleOutcomes } from '../db/statements/settle.js';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { RAW_SCHEMA_CLAIM, RAW_SCHEMA_COMPLETE } from './systems/raw-schema.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REPS = Number(process.argv[2] ?? 7);
const PLAN = process.argv[3] === '1';
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const url = await freshDatabase(server, 'bench_probe');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
const enqueuer = createEnqueuer();
for (let i = 0; i < 51_000; i += 1000)
  await enqueuer.enqueueMany(
    db,
    Array.from({ length: 1000 }, (_, j) => noop.with({ n: i + j })),
  );
await vacuumAnalyze(url);

// What the driver would send: the hot transaction's named statement, captured instead of sent.
type Captured = { text: string; values: unknown[] };
let capture: Captured | undefined;
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as { submit?: (c: unknown) => unknown; name?: string; callback?: (e: Error) => void };
  if (capture && typeof q?.submit === 'function' && q.name?.startsWith('skiplock_')) {
    const got: Captured = { text: '', values: [] };
    q.submit({
      stream: { writable: false, write() {}, destroy() {} },
      parsedStatements: {},
      submittedNamedStatements: {},
      parse: (p: { text: string }) => {
        got.text = p.text;
      },
      bind: (b: { values: unknown[] }) => {
        got.values = b.values;
      },
    });
    Object.assign(capture, got);
    setImmediate(() => q.callback?.(new Error('captured')));
    return q;
  }
  return original.apply(this, args);
};
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
// 1,000 running jobs for the settle, claimed for real.
const running = [
  ...(await claimJobs(db.executor, 'skiplock', { leases, limit: 500, invocationId: 'probe' })).jobs,
  ...(await claimJobs(db.executor, 'skiplock', { leases, limit: 500, invocationId: 'probe' })).jobs,
];
const claim: Captured = { text: '', values: [] };
capture = claim;
await claimJobs(db.executor, 'skiplock', { leases, limit: 500, invocationId: 'probe', settle: [] }).catch(() => {});
const settle: Captured = { text: '', values: [] };
capture = settle;
await settleOutcomes(
  db.executor,
  'skiplock',
  running.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const })),
).catch(() => {});
const half = running.slice(0, 500).map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
const settle500: Captured = { text: '', values: [] };
capture = settle500;
await settleOutcomes(db.executor, 'skiplock', half).catch(() => {});
const both: Captured = { text: '', values: [] };
capture = both;
await claimJobs(db.executor, 'skiplock', { leases, limit: 500, invocationId: 'probe', settle: half }).catch(() => {});
capture = undefined;
await db.close();

if (process.env.PROBE_TEXTS) {
  for (const [label, q] of [
    ['settle 500', settle500],
    ['both', both],
  ] as const) {
    console.log(`== ${label}\n${q.text.slice(0, 1500)}`);
    console.log(q.values.map((v, i) => `$${i + 1} ${typeof v} ${String(v).slice(0, 80)}`).join('\n'));
  }
  process.exit(0);
}
const client = new pg.Client({ connectionString: url });
await client.connect();
/**
 * PROBE_LOG=<the server's log file>: statements are run, not explained, and their time is the
 * server's logged duration of the execute (log_min_duration_statement = 0 in this session), which
 * includes writing the answer to the client — what EXPLAIN leaves out.
 */
const LOG = process.env.PROBE_LOG;
const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid;
if (LOG) await client.query('set log_min_duration_statement = 0; set log_parameter_max_length = 0');
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
const execMs = (rows: { 'QUERY PLAN': string }[]) =>
  Number(
    rows
      .map((r) => r['QUERY PLAN'])
      .find((l) => l.startsWith('Execution Time'))
      ?.match(/([\d.]+) ms/)?.[1],
  );
/** Median execution ms of `q` over REPS runs, each in a transaction rolled back; `before` runs first in it. */
async function measure(label: string, q: Captured, jobs: number, before?: () => Promise<unknown[]>) {
  const times: number[] = [];
  let plan = '';
  for (let i = 0; i < REPS; i++) {
    await client.query('begin; set local plan_cache_mode = force_generic_plan; set local enable_seqscan = off');
    const values = before ? await before() : q.values;
    const name = `p${label.replace(/\W/g, '')}${i}`;
    if (LOG) {
      // Run as sent: the server's own duration of the execute, output to the client included.
      const from = statSync(LOG).size;
      await client.query({ name, text: q.text, values, rowMode: 'array' });
      const lines = readFileSync(LOG).subarray(from).toString('utf8');
      const ms = [...lines.matchAll(/\[(\d+)\] \S+ LOG: {2}duration: ([\d.]+) ms {2}execute (p\w+):/g)].find(
        (m) => Number(m[1]) === pid && m[3] === name,
      )?.[2];
      times.push(Number(ms));
    } else {
      const res = await client.query<{ 'QUERY PLAN': string }>({
        name,
        text: `explain (analyze, buffers${PLAN ? '' : ', timing off'}) ${q.text}`,
        values,
      });
      times.push(execMs(res.rows));
      if (i === REPS - 1) plan = res.rows.map((r) => r['QUERY PLAN']).join('\n');
    }
    await client.query('rollback');
  }
  console.log(
    `${label.padEnd(28)} median ${median(times).toFixed(2)} ms (${((median(times) * 1000) / jobs).toFixed(1)} µs a job); runs ${times.map((t) => t.toFixed(2)).join(' ')}`,
  );
  if (PLAN) console.log(plan);
}
await measure('skiplock claim 500', claim, 500);
// PROBE_VARIANTS: label@@regex=>replacement;… applied to the claim's text (PROBE_ON=both: the claim with a settle of 500).
const base = process.env.PROBE_ON === 'both' ? both : process.env.PROBE_ON === 'settle' ? settle : claim;
for (const v of (process.env.PROBE_VARIANTS ?? '').split(';').filter(Boolean)) {
  const [label, rule] = v.split('@@') as [string, string];
  const [from, to] = rule.split('=>') as [string, string];
  const text = base.text.replace(new RegExp(from, 's'), to);
  if (text === base.text) console.log(`${label}: no match`);
  await measure(`variant: ${label}`, { text, values: base.values }, base === settle ? 1000 : 500);
}
if (process.env.PROBE_ON === 'both') await measure('settle 500 + claim 500 (again)', both, 500);
if (process.env.PROBE_ON === 'settle') await measure('skiplock settle 1000 (again)', settle, 1000);
await measure('skiplock claim 500 (again)', claim, 500);
await measure('skiplock settle 1000', settle, 1000);
await measure('skiplock settle 500', settle500, 500);
await measure('settle 500 + claim 500', both, 500);
await measure('skiplock claim 500 (3rd)', claim, 500);
await measure('skiplock settle 500 (2nd)', settle500, 500);
await measure('settle 500 + claim 500 (2nd)', both, 500);
const token = randomUUID();
await measure('floor claim 500', { text: RAW_SCHEMA_CLAIM, values: [500, token, token] }, 500);
await measure('floor complete 500', { text: RAW_SCHEMA_COMPLETE, values: [] }, 500, async () => {
  const t = randomUUID();
  const { rows } = await client.query(RAW_SCHEMA_CLAIM, [500, t, t]);
  return [rows.map((r) => r.id), t];
});
await client.end();
process.exit(0);
