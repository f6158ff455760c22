import { sql } from 'drizzle-orm';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import type { SkiplockDb } from '../../db/connect.js';
import { poolSettings } from '../../db/connection-options.js';
import { namedRunner, openPgPool } from '../../db/drivers/pg-pool.js';
import { Faults } from '../../testing/faults.js';
import { startPgProxy } from '../../testing/pg-proxy.js';
import { databaseUrl, openDb, type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// pg sends a worker's per-batch statements (the claim, the settle) as named prepared statements,
// each in a transaction of its own that asks for one generic plan (db/drivers/pg-pool.ts), sent and
// answered as one exchange (db/drivers/pg-hot.ts). Each pool here has one connection, so what the
// test reads from pg_prepared_statements is the worker's own session.
let t: TestContext;
useTestSchema('core-prepared', (ctx) => {
  t = ctx;
});
const pools: SkiplockDb[] = [];
const pgPools: pg.Pool[] = [];
afterEach(async () => {
  for (const pool of pools.splice(0)) await pool.close();
  for (const pool of pgPools.splice(0)) await pool.end();
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

/**
 * The pg driver's hot runner on a pool of one connection, with what the server answered on it: each
 * ReadyForQuery (one per Sync: one per exchange) and its transaction status.
 */
function hotRunner() {
  const pool = openPgPool(poolSettings({ connectionString: databaseUrl(), max: 1 }).settings);
  pgPools.push(pool);
  const ready: string[] = [];
  pool.on('connect', (client) => {
    const { connection } = client as unknown as { connection: NodeJS.EventEmitter };
    connection.on('readyForQuery', (message: { status: string }) => ready.push(message.status));
  });
  const hot = namedRunner(pool);
  return {
    /** Runs `statement` hot; returns its rows and the ReadyForQuery statuses it took. */
    run: async (statement: ReturnType<typeof sql>) => {
      const before = ready.length;
      const rows = await hot(statement);
      return { rows, ready: ready.slice(before) };
    },
    /** A plain statement on the same connection (the pool has one). */
    query: async (text: string) => (await pool.query(text)).rows,
    ready,
  };
}

describe('a hot statement on pg: one exchange of BEGIN, the plan settings, the statement and COMMIT', () => {
  it('is answered once, runs under the settings, and leaves the connection idle', async () => {
    const hot = hotRunner();
    await hot.query('select 1'); // the connection's own start and JIT setting
    const settings = sql`select current_setting('plan_cache_mode') as mode, current_setting('enable_seqscan') as seqscan`;
    for (let i = 0; i < 3; i++) {
      // The first run parses the name, the later ones bind it alone: one ReadyForQuery either way.
      expect(await hot.run(settings)).toEqual({
        rows: [{ mode: 'force_generic_plan', seqscan: 'off' }],
        ready: ['I'],
      });
    }
    expect(await hot.query('select count(*)::int as n from pg_prepared_statements')).toEqual([{ n: 1 }]);
    expect(await hot.query(`select current_setting('plan_cache_mode') as mode`)).toEqual([{ mode: 'auto' }]);
  });

  it('a statement that fails after writing gives its SQLSTATE, writes nothing, and the connection serves the next', async () => {
    const hot = hotRunner();
    await t.admin.query(`create table "${t.schema}".hot_probe (n int)`);
    const failing = sql.raw(
      `with written as (insert into "${t.schema}".hot_probe values (1) returning n) select n / (n - 1) as q from written`,
    );
    for (let i = 0; i < 2; i++) {
      await expect(hot.run(failing)).rejects.toMatchObject({ code: '22012' });
      // Skipped to the Sync with the transaction BEGIN opened aborted ('E'); withClient's ROLLBACK ended it ('I').
      expect(hot.ready.slice(-2)).toEqual(['E', 'I']);
    }
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".hot_probe`)).rows).toEqual([{ n: 0 }]);
    expect((await hot.run(sql`select 1 as one`)).rows).toEqual([{ one: 1 }]);
    expect(await hot.query('select pg_current_xact_id_if_assigned() is null as idle')).toEqual([{ idle: true }]);
  });

  it('a statement that fails to parse (before BEGIN took effect) is parsed again once it can be, still named', async () => {
    const hot = hotRunner();
    const later = sql.raw(`select count(*)::int as n from "${t.schema}".hot_later`);
    await expect(hot.run(later)).rejects.toMatchObject({ code: '42P01' });
    // Nothing was begun: the Sync ended the failed implicit transaction ('I'), and so did ROLLBACK.
    expect(hot.ready.slice(-2)).toEqual(['I', 'I']);
    await t.admin.query(`create table "${t.schema}".hot_later (n int)`);
    expect((await hot.run(later)).rows).toEqual([{ n: 0 }]);
    // Parsed under its name this time, not bound to a name the server never had (which would read as a
    // pooler's refusal and turn the pool to unnamed statements).
    expect(await hot.query('select count(*)::int as n from pg_prepared_statements')).toEqual([{ n: 1 }]);
  });

  it('an answer that never comes fails at the query timeout, and the connection is dropped, not waited on', async () => {
    const faults = new Faults();
    const upstream = new URL(databaseUrl());
    const proxy = await startPgProxy({
      upstreamHost: upstream.hostname,
      upstreamPort: Number(upstream.port || 5432),
      faults,
    });
    const timeoutMs = 1_000;
    const pool = openPgPool(
      poolSettings({ connectionString: proxy.urlFor(databaseUrl()), max: 1, queryTimeoutMs: timeoutMs }).settings,
    );
    pgPools.push(pool);
    const hot = namedRunner(pool);
    try {
      expect(await hot(sql`select 1 as one`)).toEqual([{ one: 1 }]);
      faults.inject({ mode: 'half-open', match: 'never_answered', delayMs: 20_000 });
      const started = performance.now();
      await expect(hot(sql`select 'never_answered' as marker`)).rejects.toThrow('Query read timeout');
      // Once the timeout, not twice (a ROLLBACK behind the unanswered exchange would time out too).
      expect(performance.now() - started).toBeLessThan(1.9 * timeoutMs);
      expect(await hot(sql`select 2 as two`)).toEqual([{ two: 2 }]);
    } finally {
      await proxy.close();
    }
  });
});
