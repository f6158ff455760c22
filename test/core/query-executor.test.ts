import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { queryExecutor } from '../../db/query-executor.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';

// Enqueue (and signal) inside the transaction of the Postgres tools teams use, through one seam:
// queryExecutor((text, params) => …). Each tool on a real database: what a committed transaction
// enqueued is there, what a rolled-back one enqueued never existed.
let t: TestContext;
useTestSchema('core-query-executor', (ctx) => {
  t = ctx;
});

const order = defineJob({ kind: 'order', payload: z.object({ id: z.string() }) });
let q: ReturnType<typeof createEnqueuer>;
let pool: pg.Pool;
let sql: postgres.Sql;
let kysely: Kysely<Record<string, never>>;
beforeAll(() => {
  q = createEnqueuer({ schema: t.schema });
  pool = new pg.Pool({ connectionString: databaseUrl(), max: 2 });
  sql = postgres(databaseUrl(), { max: 2, onnotice: () => {} });
  kysely = new Kysely({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl(), max: 2 }) }),
  });
});
afterAll(async () => {
  await pool.end();
  await sql.end();
  await kysely.destroy();
});

const queued = async () =>
  (await t.admin.query(`select payload->>'id' as id from "${t.schema}".jobs order by id`)).rows.map((r) => r.id);
const signals = async () =>
  (await t.admin.query(`select key from "${t.schema}".signals order by id`)).rows.map((r) => r.key);

/** Runs `work` in a transaction of each tool, committing (true) or rolling back (false). */
const tools: Record<
  string,
  (commit: boolean, work: (db: ReturnType<typeof queryExecutor>) => Promise<void>) => Promise<void>
> = {
  'node-postgres PoolClient': async (commit, work) => {
    const client = await pool.connect();
    try {
      await client.query('begin');
      await work(queryExecutor((text, params) => client.query(text, params)));
      await client.query(commit ? 'commit' : 'rollback');
    } finally {
      client.release();
    }
  },
  'postgres.js sql.begin': async (commit, work) => {
    await sql
      .begin(async (tx) => {
        await work(queryExecutor((text, params) => tx.unsafe(text, params as postgres.ParameterOrJSON<never>[])));
        if (!commit) throw new Error('roll back');
      })
      .catch((err: Error) => {
        if (commit || err.message !== 'roll back') throw err;
      });
  },
  'Kysely transaction': async (commit, work) => {
    await kysely
      .transaction()
      .execute(async (trx) => {
        await work(queryExecutor((text, params) => trx.executeQuery(CompiledQuery.raw(text, params))));
        if (!commit) throw new Error('roll back');
      })
      .catch((err: Error) => {
        if (commit || err.message !== 'roll back') throw err;
      });
  },
};

describe.each(Object.entries(tools))('enqueue in a transaction of %s', (name, inTransaction) => {
  it('a committed transaction leaves its jobs and signals; a rolled-back one leaves nothing', async () => {
    await inTransaction(false, async (db) => {
      await q.enqueue(db, order, { id: `${name}: rolled back` });
      await q.signal(db, `${name}: never`, { n: 1 });
    });
    expect(await queued()).toEqual([]);
    expect(await signals()).toEqual([]);
    let results: unknown[] = [];
    await inTransaction(true, async (db) => {
      const first = await q.enqueue(db, order, { id: `${name}: committed` }, { dedupe: { key: 'o-1' } });
      // The dedupe path (a second statement to find the holder) through the same executor.
      const again = await q.enqueue(db, order, { id: `${name}: duplicate` }, { dedupe: { key: 'o-1' } });
      const sent = await q.signal(db, `${name}: sent`, { n: 2 });
      results = [first.outcome, again.outcome, again.id === first.id, typeof sent.id];
    });
    expect(results).toEqual(['inserted', 'deduplicated', true, 'string']);
    expect(await queued()).toEqual([`${name}: committed`]);
    expect(await signals()).toEqual([`${name}: sent`]);
  });
});
