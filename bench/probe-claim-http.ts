/**
 * Dev probe (issue 41): what the database pays for each claim over HTTP, where nothing is prepared
 * (`node .bench/probe-claim-http.mjs [ROUNDS]`). The burst's table (10,000 jobs, 20 registered
 * invocations: lanes on), five of them claimed; then each statement below is sent ROUNDS times as
 * the SQL-over-HTTP endpoint sends it (the unnamed extended protocol: parsed, planned and run every
 * time), inside BEGIN … ROLLBACK so that every round sees the same table. Prints, per statement,
 * the backend's CPU per round (from /proc, less an empty BEGIN … ROLLBACK's), the planning time
 * EXPLAIN reports, and the text's length.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import * as z from 'zod';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { renderSql } from '../db/render.js';
import { type ClaimRequest, claimJobs, claimStatement } from '../db/statements/claim.js';
import { registerInvocation } from '../db/statements/invocations.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { freshDatabase } from './db.js';
import { seedBurst } from './serverless/burst.js';

const rounds = Number(process.argv[2] ?? 300);
const server = (await resolveTestDatabase()).url;
const url = await freshDatabase(server, 'skiplock_probe_claim_http');
const job = defineJob({ kind: 'burst', payload: z.object({ n: z.number() }), handler: async () => {} });
await seedBurst(url, job, 10_000);
const db = connect({ connectionString: url, max: 1 });
for (let i = 0; i < 20; i++) {
  await registerInvocation(db.executor, 'skiplock', {
    worker: 'default',
    invocationId: `probe-${i}`,
    max: 20,
    ttlMs: 600_000,
  });
}
const leases = [{ kind: 'burst', leaseMs: 40_000 }];
const first = await claimJobs(db.executor, 'skiplock', { leases, limit: 5, invocationId: 'probe-0' });
const settle = first.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
const base: ClaimRequest = { leases, limit: 5, invocationId: 'probe-0' };
const lane = { lane: 3, laneWhen: { worker: 'default', moreThan: 4 } };
const token = '00000000-0000-4000-8000-000000000001';
const render = (request: ClaimRequest) => {
  const { sql: text, params } = renderSql(claimStatement('skiplock', request, 'plain', token));
  return { text, values: params };
};
const statements: [label: string, statement: { text: string; values: unknown[] }][] = [
  ['select 1', { text: 'select 1', values: [] }],
  ['head claim', render(base)],
  ['head claim + settle of 5', render({ ...base, settle })],
  ['lane claim + settle of 5', render({ ...base, ...lane, settle })],
];
// PROBE_DUMP=path: the lane claim + settle's text written there, to edit into variants for PROBE_SQL.
if (process.env.PROBE_DUMP) writeFileSync(process.env.PROBE_DUMP, render({ ...base, ...lane, settle }).text);
for (const extra of (process.env.PROBE_SQL ?? '').split(',').filter(Boolean)) {
  // More texts to compare: files of SQL with the same parameters as the lane claim + settle.
  statements.push([extra, { text: readFileSync(extra, 'utf8'), values: render({ ...base, ...lane, settle }).values }]);
}
await db.close();

const client = new pg.Client({ connectionString: url });
await client.connect();
const pid = Number((await client.query('select pg_backend_pid() as pid')).rows[0].pid);
const ticks = () => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return Number(fields[11]) + Number(fields[12]);
};
const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1] as number;
/** Backend CPU per round of `run`, ms. */
const cpuPerRound = async (run: () => Promise<unknown>) => {
  for (let i = 0; i < 20; i++) await run(); // warm: caches, plpgsql
  const t = ticks();
  for (let i = 0; i < rounds; i++) await run();
  return ((ticks() - t) * 10) / rounds;
};
const empty = await cpuPerRound(async () => {
  await client.query('begin');
  await client.query('rollback');
});
for (const [label, q] of statements) {
  const cpu = await cpuPerRound(async () => {
    await client.query('begin');
    await client.query(q.text, q.values);
    await client.query('rollback');
  });
  const planning: number[] = [];
  for (let i = 0; i < 50; i++) {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain (summary) ${q.text}`, q.values);
    const line = rows.map((r) => r['QUERY PLAN']).find((l) => l.startsWith('Planning Time'));
    planning.push(Number(line?.match(/([\d.]+) ms/)?.[1]));
  }
  console.log(
    `${label}: backend CPU ${(cpu - empty).toFixed(2)} ms per statement, planning ${median(planning).toFixed(3)} ms, ${q.text.length} chars`,
  );
}
await client.end();
process.exit(0);
