import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';

const url = 'postgres://postgres@127.0.0.1:5432/test';
const schema = 'probe2';
const admin = new pg.Pool({ connectionString: url });
await admin.query(`drop schema if exists ${schema} cascade`);
const db = connect({ connectionString: url });
await migrate(db, { schema });
const job = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: () => {} });
const q = createEnqueuer({ schema });
for (let i = 0; i < 20000; i += 1000)
  await q.enqueueMany(
    db,
    Array.from({ length: 1000 }, (_, j) => job.with({ n: i + j })),
  );
await admin.query(`vacuum analyze ${schema}.jobs`);
const first = await claimJobs(db.db, schema, {
  leases: [{ kind: 'noop', leaseMs: 30000 }],
  limit: 100,
  invocationId: 'x',
});
let captured: { text: string; values: unknown[] } | undefined;
const orig = pg.Client.prototype.query as (...a: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: unknown, ...args: unknown[]) {
  const a = args[0] as { text?: string; values?: unknown[] };
  if (a?.text?.includes('claimed as')) captured = { text: a.text, values: a.values ?? (args[1] as unknown[]) ?? [] };
  return orig.apply(this, args);
};
await claimJobs(db.db, schema, {
  leases: [{ kind: 'noop', leaseMs: 30000 }],
  limit: 100,
  invocationId: 'x',
  settle: first.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const })),
});
(pg.Client.prototype as unknown as { query: unknown }).query = orig;
console.log('sql length', captured!.text.length);
const client = await admin.connect();
await client.query('begin');
const plan = await client.query({
  text: `explain (analyze, buffers, costs off, summary) ${captured!.text}`,
  values: captured!.values,
});
console.log(
  plan.rows
    .map((r) => r['QUERY PLAN'])
    .filter((l: string) => !/CTE Scan on clock|InitPlan|never executed/.test(l))
    .join('\n'),
);
await client.query('rollback');
client.release();
await db.close();
await admin.end();
