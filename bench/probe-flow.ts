/**
 * Dev probe: EXPLAIN (ANALYZE, BUFFERS) of the claim statement in its plain and flow shapes
 * (`npx tsx bench/probe-flow.ts [plain|limit|keyed|big|ordering]`); `ordering`: 50,000 jobs over
 * 1,000 ordering keys (a ready head and 49 parked followers each), claimed 500 at a time.
 */
import pg from 'pg';
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimJobs } from '../db/statements/claim.js';
import { freshDatabase, vacuumAnalyze } from './db.js';

const mode = process.argv[2] ?? 'plain';
const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const url = await freshDatabase(server, 'bench_probe_flow');
const db = connect({ connectionString: url, max: 1 });
await migrate(db);
const enq = createEnqueuer();
if (mode === 'keyed' || mode === 'big') {
  if (mode === 'big') {
    for (let b = 0; b < 20; b++)
      await enq.enqueueMany(
        db,
        Array.from({ length: 5000 }, (_, n) => noop.with({ n }, { concurrencyKey: 'big' })),
      );
  }
  await enq.enqueueMany(
    db,
    Array.from({ length: 5000 }, (_, n) => noop.with({ n }, { concurrencyKey: `t${n % 100}` })),
  );
}
if (mode === 'ordering') {
  for (let b = 0; b < 50; b++)
    await enq.enqueueMany(
      db,
      Array.from({ length: 1000 }, (_, n) => noop.with({ n }, { orderingKey: `k${n}` })),
    );
} else {
  await enq.enqueueMany(
    db,
    Array.from({ length: 5000 }, (_, n) => noop.with({ n })),
  );
}
await vacuumAnalyze(url);
const leases = [{ kind: 'noop', leaseMs: 60_000 }];
type Statement = { text: string; values: unknown[] };
const captured: Statement[] = [];
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as { text?: string; values?: unknown[] };
  if (typeof q === 'object' && q?.text?.includes('ready as'))
    captured.push({ text: q.text, values: q.values ?? (args[1] as unknown[]) ?? [] });
  return original.apply(this, args);
};
const limits =
  mode === 'limit'
    ? [{ scope: 'queue' as const, name: 'default', maxRunning: 50 }]
    : mode === 'plain'
      ? []
      : [{ scope: 'key' as const, name: 'default', maxRunning: 5 }];
const first = await claimJobs(db.executor, 'skiplock', {
  leases,
  limit: mode === 'ordering' ? 500 : 100,
  invocationId: 'probe',
  limits,
});
console.log(
  'claimed',
  first.jobs.length,
  'keys',
  new Set(first.jobs.map((j) => (j as { concurrencyKey?: string }).concurrencyKey)).size,
);
proto.query = original;
const client = new pg.Client({ connectionString: url });
await client.connect();
const q = captured[0] as Statement;
await client.query('begin');
const plan = await client.query(`explain (analyze, buffers) ${q.text}`, q.values);
await client.query('rollback');
console.log(plan.rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n'));
await client.end();
await db.close();
