import { sql } from 'drizzle-orm';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import type { SkiplockDb } from '../../db/connect.js';
import { openDb, type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// pg sends a worker's per-batch statements (the claim, the settle) as named prepared statements,
// each in a transaction of its own that asks for one generic plan (db/drivers/pg-pool.ts). Each pool
// here has one connection, so what the test reads from pg_prepared_statements is the worker's own
// session.
let t: TestContext;
useTestSchema('core-prepared', (ctx) => {
  t = ctx;
});
const pools: SkiplockDb[] = [];
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.close();
});

const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
const enqueue = (from: number, count: number) =>
  enqueuerFor(t.schema).enqueueMany(
    t.db,
    Array.from({ length: count }, (_, i) => noop.with({ n: from + i })),
  );
const run = (db: SkiplockDb) =>
  createWorker({ db, schema: t.schema, jobs: [noop], logger: silentLogger, batchSize: 5 }).runInvocation({
    remainingMs: 60_000,
  });
const onePool = (preparedStatements?: boolean) => {
  const db = openDb({ max: 1, ...(preparedStatements === undefined ? {} : { preparedStatements }) });
  pools.push(db);
  return db;
};
const rowsOf = async <T>(db: SkiplockDb, query: ReturnType<typeof sql>) =>
  ((await db.db.execute(query)) as unknown as { rows: T[] }).rows;
const session = async (db: SkiplockDb) => {
  const prepared = await rowsOf<{ name: string; generic_plans: string; custom_plans: string }>(
    db,
    sql`select name, generic_plans, custom_plans from pg_prepared_statements`,
  );
  const settings = await rowsOf<{ plan_cache_mode: string; enable_seqscan: string }>(
    db,
    sql`select current_setting('plan_cache_mode') as plan_cache_mode, current_setting('enable_seqscan') as enable_seqscan`,
  );
  return {
    names: prepared.map((p) => p.name),
    genericPlans: prepared.reduce((n, p) => n + Number(p.generic_plans), 0),
    customPlans: prepared.reduce((n, p) => n + Number(p.custom_plans), 0),
    planCacheMode: settings[0]?.plan_cache_mode,
    enableSeqscan: settings[0]?.enable_seqscan,
  };
};

describe('named prepared statements (pg)', () => {
  it('the claim and the settle are parsed once per connection and planned once, and the session keeps its own settings', async () => {
    await enqueue(0, 40);
    const db = onePool();
    expect(await run(db)).toMatchObject({ claimed: 40, completed: 40, stoppedBecause: 'drained' });
    const { names, genericPlans, customPlans, planCacheMode, enableSeqscan } = await session(db);
    // Eight claims of five and their settles, as a handful of statements: one per text.
    expect(names.length).toBeGreaterThanOrEqual(1);
    expect(names.length).toBeLessThanOrEqual(4);
    expect(names.every((name) => /^skiplock_[0-9a-f]{24}$/.test(name))).toBe(true);
    // Every run reused its statement's one plan: none was planned for its parameters.
    expect(genericPlans).toBeGreaterThanOrEqual(9);
    expect(customPlans).toBe(0);
    // The settings the plans were made under were local to each statement's transaction.
    expect({ planCacheMode, enableSeqscan }).toEqual({ planCacheMode: 'auto', enableSeqscan: 'on' });
  });

  it("a durable step's read and record are parsed once per connection and planned once", async () => {
    const stepped = defineJob({
      kind: 'stepped',
      payload: z.object({ n: z.number() }),
      handler: async (_p, ctx) => {
        for (const name of ['a', 'b', 'c']) await ctx.step(name, () => name);
      },
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 10 }, (_, n) => stepped.with({ n })),
    );
    const db = onePool();
    const worker = createWorker({ db, schema: t.schema, jobs: [stepped], logger: silentLogger, batchSize: 5 });
    expect(await worker.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 10 });
    const steps = await rowsOf<{ reads: boolean; generic_plans: string; custom_plans: string }>(
      db,
      sql`select statement like '%left join%' as reads, generic_plans, custom_plans from pg_prepared_statements
        where statement like '%job_steps%' order by 1`,
    );
    // One read per job (its first step), one record per step: 10 and 30 runs of two statements.
    expect(steps.map((s) => [s.reads, Number(s.generic_plans), Number(s.custom_plans)])).toEqual([
      [false, 30, 0],
      [true, 10, 0],
    ]);
  });

  it('preparedStatements: false sends them unnamed and leaves the planner alone', async () => {
    await enqueue(100, 10);
    const db = onePool(false);
    expect(await run(db)).toMatchObject({ claimed: 10, completed: 10 });
    expect(await session(db)).toEqual({
      names: [],
      genericPlans: 0,
      customPlans: 0,
      planCacheMode: 'auto',
      enableSeqscan: 'on',
    });
  });

  it('a server that does not know a name it was given (a pooler in transaction mode) turns the pool to unnamed statements; nothing is lost', async () => {
    await enqueue(200, 10);
    const db = onePool();
    expect(await run(db)).toMatchObject({ claimed: 10, completed: 10 });
    expect((await session(db)).names.length).toBeGreaterThan(0);
    // What a pooler does: the next Bind reaches a server connection that never parsed the name.
    // node-postgres still believes it parsed, so it sends the name alone.
    await db.db.execute(sql`deallocate all`);
    await enqueue(300, 10);
    expect(await run(db)).toMatchObject({ claimed: 10, completed: 10, stoppedBecause: 'drained' });
    expect((await session(db)).names).toEqual([]);
    const states = await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state`);
    expect(states.rows).toEqual([{ state: 'completed', n: 20 }]);
  });
});
