import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PrismaPg } from '@prisma/adapter-pg';
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
// enqueued is there, what a rolled-back one enqueued never existed. Prisma 7's client is generated
// here (`prisma generate`) and talks to Postgres through its driver adapter for node-postgres.
let t: TestContext;
useTestSchema('core-query-executor', (ctx) => {
  t = ctx;
});

const order = defineJob({ kind: 'order', payload: z.object({ id: z.string() }) });
let q: ReturnType<typeof createEnqueuer>;
let pool: pg.Pool;
let sql: postgres.Sql;
let kysely: Kysely<Record<string, never>>;

/** The part of a generated Prisma client this test uses. */
interface Prisma {
  $transaction<T>(work: (tx: Prisma) => Promise<T>): Promise<T>;
  $queryRawUnsafe(text: string, ...params: unknown[]): Promise<unknown[]>;
  $disconnect(): Promise<void>;
}
let prisma: Prisma;
const prismaDir = resolve(import.meta.dirname, `../../.test-tmp/prisma-${process.pid}`);

/**
 * `prisma generate` for an empty schema, into the repository (the generated TypeScript imports
 * @prisma/client from node_modules). Generating needs no schema engine, but the CLI checks that
 * one was downloaded (from binaries.prisma.sh, which this machine cannot reach): pointing
 * PRISMA_SCHEMA_ENGINE_BINARY at a stand-in satisfies the check. A user's machine downloads it.
 */
async function generatePrismaClient(): Promise<Prisma> {
  mkdirSync(prismaDir, { recursive: true });
  const schema = join(prismaDir, 'schema.prisma');
  writeFileSync(
    schema,
    'generator client {\n  provider = "prisma-client"\n  output   = "./client"\n}\n\ndatasource db {\n  provider = "postgresql"\n}\n',
  );
  await promisify(execFile)(resolve('node_modules/.bin/prisma'), ['generate', '--schema', schema], {
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: '/bin/true', PRISMA_HIDE_UPDATE_MESSAGE: '1' },
    timeout: 60_000,
  });
  const { PrismaClient } = (await import(pathToFileURL(join(prismaDir, 'client/client.ts')).href)) as {
    PrismaClient: new (options: { adapter: PrismaPg }) => Prisma;
  };
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl(), max: 2 }) });
}

beforeAll(async () => {
  prisma = await generatePrismaClient();
}, 90_000);
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
  await prisma.$disconnect();
  rmSync(prismaDir, { recursive: true, force: true });
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
  'Prisma interactive transaction': async (commit, work) => {
    await prisma
      .$transaction(async (tx) => {
        await work(queryExecutor((text, params) => tx.$queryRawUnsafe(text, ...params)));
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
