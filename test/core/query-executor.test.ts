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
import { createEnqueuer, type EnqueueResult } from '../../core/enqueue.js';
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

// enqueueMany and enqueueFlow through the same executors: a committed transaction leaves every row
// (with its options, its parents and dependents), a rolled-back one none, and nothing is visible
// outside the transaction before it commits.
const email = defineJob({ kind: 'email', queue: 'emails', payload: z.object({ id: z.string() }) });
/** The jobs as the admin pool (outside any test transaction) sees them, by id. */
const jobRows = async () =>
  (
    await t.admin.query(
      `select j.id::text, kind, queue, payload->>'id' as pid, priority, correlation_id, dedupe_key, dedupe_mode,
        state, run_at = 'infinity' as waiting, run_at > now() + interval '50 minutes' as later,
        coalesce(after::text[], '{}') as after, coalesce(dependents::text[], '{}') as dependents, on_parent_failure
      from "${t.schema}".jobs j order by j.id`,
    )
  ).rows;
const count = async () => (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0].n;

describe.each(Object.entries(tools))('enqueueMany and enqueueFlow in a transaction of %s', (name, inTransaction) => {
  it('enqueueMany: a committed transaction leaves every job with its options, in input order; a rolled-back one leaves none', async () => {
    await inTransaction(false, async (db) => {
      const results = await q.enqueueMany(db, [order.with({ id: 'r1' }), email.with({ id: 'r2' })]);
      expect(results.map((r) => r.outcome)).toEqual(['inserted', 'inserted']);
      // Written inside this transaction: the transaction sees them, no one else does.
      expect(await count()).toBe(0);
    });
    expect(await count()).toBe(0);

    let results: EnqueueResult[] = [];
    let holder = '';
    await inTransaction(true, async (db) => {
      // A job holding a skip key and one holding a replace key, written earlier in the transaction.
      holder = (await q.enqueue(db, order, { id: 'held' }, { dedupe: { key: `${name}:skip` } })).id;
      await q.enqueue(db, email, { id: 'old' }, { dedupe: { key: `${name}:replace`, mode: 'replace' } });
      results = await q.enqueueMany(db, [
        order.with({ id: 'a' }, { priority: 5, correlationId: 'req-1' }),
        email.with({ id: 'b' }, { delayMs: 3_600_000 }),
        // Both find what this transaction wrote before them (the second pass finds the skip holder).
        order.with({ id: 'duplicate' }, { dedupe: { key: `${name}:skip` } }),
        email.with({ id: 'new' }, { dedupe: { key: `${name}:replace`, mode: 'replace' } }),
        order.with({ id: 'windowed' }, { dedupe: { key: `${name}:window`, mode: 'window', windowMs: 60_000 } }),
      ]);
      expect(await count()).toBe(0);
    });
    expect(results.map((r) => r.outcome)).toEqual(['inserted', 'inserted', 'deduplicated', 'replaced', 'inserted']);
    expect(results[2]?.id).toBe(holder);
    const rows = await jobRows();
    expect(rows.map((r) => r.pid)).toEqual(['held', 'new', 'a', 'b', 'windowed']);
    const byPid = Object.fromEntries(rows.map((r) => [r.pid, r]));
    expect(results.map((r) => r.id)).toEqual([byPid.a.id, byPid.b.id, byPid.held.id, byPid.new.id, byPid.windowed.id]);
    expect(byPid.a).toMatchObject({ kind: 'order', queue: 'default', priority: 5, correlation_id: 'req-1' });
    expect(byPid.a.later).toBe(false);
    expect(byPid.b).toMatchObject({ kind: 'email', queue: 'emails', later: true, state: 'queued' });
    expect(byPid.new).toMatchObject({ kind: 'email', dedupe_key: `${name}:replace`, dedupe_mode: 'replace' });
    expect(byPid.windowed).toMatchObject({ dedupe_key: `${name}:window`, dedupe_mode: 'window' });
  });

  it('enqueueFlow: a committed transaction leaves the steps waiting for their parents; a rolled-back one leaves none', async () => {
    const flow = (extraParent?: string) => ({
      fetch: order.with({ id: 'fetch' }),
      mail: email.with({ id: 'mail' }),
      report: order.with(
        { id: 'report' },
        { after: ['fetch', 'mail', ...(extraParent ? [extraParent] : [])], onParentFailure: 'run' },
      ),
    });
    await inTransaction(false, async (db) => {
      const steps = await q.enqueueFlow(db, flow());
      expect(Object.keys(steps)).toEqual(['fetch', 'mail', 'report']);
      expect(await count()).toBe(0);
    });
    expect(await count()).toBe(0);

    let steps: Record<'fetch' | 'mail' | 'report', EnqueueResult> | undefined;
    let earlier = '';
    await inTransaction(true, async (db) => {
      // A job enqueued earlier in the same transaction, named by id as a parent: the flow's statement
      // sees it (a parent id that names no visible job would count as completed and release the child).
      [{ id: earlier } = { id: '' }] = await q.enqueueMany(db, [order.with({ id: 'earlier' })]);
      steps = await q.enqueueFlow(db, flow(earlier));
      expect(await count()).toBe(0);
    });
    const { fetch, mail, report } = steps as NonNullable<typeof steps>;
    expect([fetch.outcome, mail.outcome, report.outcome]).toEqual(['inserted', 'inserted', 'inserted']);
    const rows = Object.fromEntries((await jobRows()).map((r) => [r.id, r]));
    expect(Object.keys(rows).sort()).toEqual([earlier, fetch.id, mail.id, report.id].sort());
    expect(rows[report.id]).toMatchObject({
      pid: 'report',
      state: 'queued',
      waiting: true,
      on_parent_failure: 'run',
    });
    expect([...rows[report.id].after].sort()).toEqual([earlier, fetch.id, mail.id].sort());
    for (const parent of [earlier, fetch.id, mail.id]) {
      expect(rows[parent]).toMatchObject({ waiting: false, dependents: [report.id], after: [] });
    }
    expect(rows[mail.id]).toMatchObject({ pid: 'mail', kind: 'email', queue: 'emails' });
  });
});
