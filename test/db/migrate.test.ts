import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidIdentifierError, NotMigratedError, SkiplockError } from '../../base/errors.js';
import { applyMigrations, type MigrationEvent, migrate } from '../../db/migrate.js';
import { LEGACY_TAGS } from '../../db/migration-journal.js';
import type { Migration } from '../../db/migration-plan.js';
import { MIGRATIONS } from '../../db/migrations.generated.js';
import { checkSchema, hasDrift } from '../../db/schema-drift.js';
import { dumpSchema, parseSchemaDump } from '../../db/schema-dump.js';
import { getJobs } from '../../db/statements/jobs-read.js';
import { readMigrationFolder } from '../../scripts/migration-folder.js';
import { openAdminPool, openDb, schemaFor } from '../helpers/db.js';

/**
 * Connected as `skiplock migrate` connects: no statement timeout. A concurrent index build waits for
 * every older transaction in the database, other test files' too, which may outlast the default 10 s.
 */
const openMigrator = () => openDb({ statementTimeoutMs: 0, queryTimeoutMs: 0 });
const db = openMigrator();
const admin = openAdminPool();
afterAll(async () => {
  await db.close();
  await admin.end();
});

/** A migration written for a test, in the shape db/migrations.generated.ts holds. */
function testMigration(tag: string, statements: string[]): Migration {
  return { tag, hash: createHash('sha256').update(statements.join('\n')).digest('hex'), statements, objectsFrom: 0 };
}

/** A schema of its own for one test: dropped first, migrated to the baseline. */
async function baselineSchema(label: string): Promise<string> {
  const schema = schemaFor(label);
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await migrate(db, { schema });
  return schema;
}

/**
 * Leaves `index` INVALID as a killed deploy does: its concurrent build waits for a transaction that
 * wrote to jobs (its catalog entry already committed) and is cancelled there.
 */
async function interruptIndexBuild(schema: string, create: string): Promise<void> {
  const writer = await admin.connect();
  const builder = await admin.connect();
  try {
    await writer.query(`begin; insert into "${schema}".jobs (kind) values ('writer')`);
    const { pid } = (await builder.query('select pg_backend_pid() as pid')).rows[0];
    const building = builder.query(create).then(
      () => 'built',
      (e: { code?: string }) => e.code,
    );
    await expect
      .poll(
        async () => (await admin.query('select wait_event_type from pg_stat_activity where pid = $1', [pid])).rows[0],
        {
          timeout: 10_000,
        },
      )
      .toEqual({ wait_event_type: 'Lock' });
    await admin.query('select pg_cancel_backend($1)', [pid]);
    expect(await building).toBe('57014');
  } finally {
    await writer.query('rollback').catch(() => {});
    writer.release();
    builder.release();
  }
}

/** Whether a statement on `target` that starts with `start` is waiting for a lock right now. */
async function waitingOnLock(start: string, target: string): Promise<boolean> {
  const { rows } = await admin.query(
    `select 1 from pg_stat_activity where query ilike $1 and query like $2 and wait_event_type = 'Lock'`,
    [`${start}%`, `%${target}%`],
  );
  return rows.length > 0;
}

const journalRows = async (schema: string) =>
  (await admin.query(`select tag, hash, steps_done from "${schema}".skiplock_migrations order by id`)).rows as {
    tag: string;
    hash: string;
    steps_done: number | null;
  }[];

describe('migrate', () => {
  const schema = schemaFor('migrate');
  beforeAll(() => admin.query(`drop schema if exists "${schema}" cascade`));
  afterAll(() => admin.query(`drop schema if exists "${schema}" cascade`));

  it('embeds exactly the migrations in db/migrations (run npm run db:dump after editing them)', () => {
    const folder = fileURLToPath(new URL('../../db/migrations', import.meta.url));
    expect(MIGRATIONS).toEqual(readMigrationFolder(folder));
    expect(MIGRATIONS.map((m) => m.tag)).toEqual(['0000_baseline']);
  });

  it('reports a missing schema as not migrated, naming the command a package user has', async () => {
    const error = await getJobs(db.executor, schema, ['1']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotMigratedError);
    expect((error as Error).message).toMatch(/run `npx skiplock migrate` \(or migrate\(\) from code\)/);
    expect((error as Error).message).not.toMatch(/npm run/);
  });

  it('applies the baseline once; a second run is a no-op', async () => {
    expect((await migrate(db, { schema })).applied).toEqual(['0000_baseline']);
    expect((await migrate(db, { schema })).applied).toEqual([]);
    expect(await journalRows(schema)).toEqual([{ tag: '0000_baseline', hash: MIGRATIONS[0]?.hash, steps_done: null }]);
  });

  it('creates exactly db/schema.sql (after changing a migration: npm run db:dump)', async () => {
    const expected = readFileSync(fileURLToPath(new URL('../../db/schema.sql', import.meta.url)), 'utf8');
    const dump = await dumpSchema(db.executor, schema);
    expect(dump.objects, 'db/schema.sql is stale: run `npm run db:dump`').toEqual(parseSchemaDump(expected));
    expect(expected.endsWith(dump.text), 'db/schema.sql is stale: run `npm run db:dump`').toBe(true);
    expect(hasDrift(await checkSchema(db.executor, schema))).toBe(false);
  });

  it('says a schema older than the code is older, and to migrate first', async () => {
    const old = await baselineSchema('migrate-outdated');
    try {
      await admin.query(`alter table "${old}".jobs drop column result cascade`);
      const error = await getJobs(db.executor, old, ['1']).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'schema_outdated' });
      expect((error as Error).message).toMatch(/older than this code \(column .*result.* does not exist\)/);
      expect((error as Error).message).toMatch(/Migrate first, then deploy/);
    } finally {
      await admin.query(`drop schema if exists "${old}" cascade`);
    }
  });

  it('lets concurrent migrators finish without errors or double application', async () => {
    const other = schemaFor('migrate-concurrent');
    await admin.query(`drop schema if exists "${other}" cascade`);
    const connections = [openMigrator(), openMigrator(), openMigrator(), openMigrator()];
    try {
      const results = await Promise.all(connections.map((c) => migrate(c, { schema: other })));
      expect(results.flatMap((r) => r.applied)).toEqual(['0000_baseline']);
      expect((await journalRows(other)).length).toBe(1);
    } finally {
      await Promise.all(connections.map((c) => c.close()));
      await admin.query(`drop schema if exists "${other}" cascade`);
    }
  });

  it('rejects hostile schema names before touching the database', async () => {
    for (const name of ['a"b', "a'b", 'a%b', 'a$b', 'a;drop table x', 'A', 'x'.repeat(64), 'ünï']) {
      await expect(migrate(db, { schema: name })).rejects.toBeInstanceOf(InvalidIdentifierError);
    }
  });

  it('enforces the lifecycle invariants in the database', async () => {
    const insert = (columns: string, values: string) =>
      admin.query(`insert into "${schema}".jobs (kind, ${columns}) values ('k', ${values})`);
    await expect(insert('state', `'paused'`)).rejects.toThrow(/jobs_state_check/);
    await expect(insert('state', `'completed'`)).rejects.toThrow(/jobs_finished_at_check/);
    await expect(insert('state, finished_at, dead_reason', `'dead', now(), null`)).rejects.toThrow(
      /jobs_dead_reason_check/,
    );
    await expect(insert('state', `'running'`)).rejects.toThrow(/jobs_running_lease_check/);
    await expect(insert('priority', '5000')).rejects.toThrow(/jobs_priority_check/);
    await expect(insert('dedupe_key', `'x'`)).rejects.toThrow(/jobs_dedupe_check/);
  });
});

describe('the journal', () => {
  const schema = schemaFor('migrate-journal');
  const journal = `"${schema}".skiplock_migrations`;
  beforeAll(() => baselineSchema('migrate-journal'));
  afterAll(() => admin.query(`drop schema if exists "${schema}" cascade`));

  it('refuses to run when an applied migration was edited since, naming it; nothing is rerun', async () => {
    await admin.query(`update ${journal} set hash = 'hash-of-the-original-file'`);
    try {
      const error = await migrate(db, { schema }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SkiplockError);
      expect(error).toMatchObject({ code: 'migration_mismatch' });
      expect((error as Error).message).toContain('0000_baseline');
      expect((error as Error).message).toMatch(/edited after it was applied/);
    } finally {
      await admin.query(`update ${journal} set hash = $1`, [MIGRATIONS[0]?.hash]);
    }
  });

  it('refuses to run on a schema migrated by a newer version (a tag it does not know)', async () => {
    await admin.query(`insert into ${journal} (tag, hash) values ('9999_from_the_future', 'f00d')`);
    try {
      const error = await migrate(db, { schema }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'migrated_by_newer_version' });
      expect((error as Error).message).toContain('9999_from_the_future');
      expect((error as Error).message).toMatch(/upgrade skiplock/i);
    } finally {
      await admin.query(`delete from ${journal} where tag = '9999_from_the_future'`);
    }
  });

  it('refuses a schema migrated by the whole pre-release chain, saying what to do; changes nothing', async () => {
    // The pre-release journal had no steps_done column.
    await admin.query(`drop table ${journal}`);
    await admin.query(`create table ${journal} (id serial primary key, tag text not null unique, hash text not null,
      applied_at timestamptz not null default now())`);
    for (const tag of LEGACY_TAGS) await admin.query(`insert into ${journal} (tag, hash) values ($1, 'old')`, [tag]);
    await admin.query(`insert into "${schema}".jobs (kind) values ('kept')`);
    try {
      const error = await migrate(db, { schema }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'legacy_migrations' });
      expect((error as Error).message).toMatch(/the whole chain, up to 0021_fan_in_recheck/);
      expect((error as Error).message).toMatch(/Drop the schema .* and run migrate again/);
      expect((await admin.query(`select tag from ${journal}`)).rowCount).toBe(LEGACY_TAGS.length);
      const stepsDone = await admin.query(
        `select 1 from pg_attribute where attrelid = '${journal}'::regclass and attname = 'steps_done'`,
      );
      expect(stepsDone.rowCount, 'the journal was altered').toBe(0);
      expect((await admin.query(`select kind from "${schema}".jobs`)).rows).toEqual([{ kind: 'kept' }]);
    } finally {
      await admin.query(`delete from ${journal}`);
      await admin.query(`delete from "${schema}".jobs`);
      await admin.query(`insert into ${journal} (tag, hash) values ('0000_baseline', $1)`, [MIGRATIONS[0]?.hash]);
    }
  });

  it('refuses a schema part-way through the pre-release chain, saying what to do; changes nothing', async () => {
    await admin.query(`delete from ${journal}`);
    for (const tag of LEGACY_TAGS.slice(0, 15))
      await admin.query(`insert into ${journal} (tag, hash) values ($1, 'old')`, [tag]);
    try {
      const error = await migrate(db, { schema }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'legacy_migrations' });
      expect((error as Error).message).toMatch(/up to 0014_destinations/);
      expect((error as Error).message).toMatch(/Drop the schema/);
      expect((await admin.query(`select tag from ${journal}`)).rowCount).toBe(15);
    } finally {
      await admin.query(`delete from ${journal}`);
      await admin.query(`insert into ${journal} (tag, hash) values ('0000_baseline', $1)`, [MIGRATIONS[0]?.hash]);
    }
  });
});

describe('online migrations', () => {
  const baseline = MIGRATIONS[0] as Migration;
  const expand = testMigration('0001_expand', [
    'ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text;',
    'ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "jobs_tenant_check" CHECK (tenant <> \'\') NOT VALID;',
    'ALTER TABLE "skiplock"."jobs" VALIDATE CONSTRAINT "jobs_tenant_check";',
    'CREATE INDEX CONCURRENTLY IF NOT EXISTS "jobs_tenant_idx" ON "skiplock"."jobs" USING btree ("tenant");',
  ]);

  it('commits each step on its own and records it; validates, and builds the index concurrently', async () => {
    const schema = await baselineSchema('online-steps');
    try {
      const events: MigrationEvent[] = [];
      const run = applyMigrations(db, [baseline, expand], { schema, onProgress: (e) => events.push(e) });
      expect((await run).applied).toEqual(['0001_expand']);
      expect(events.filter((e) => e.type === 'step').map((e) => (e.type === 'step' ? e.kind : ''))).toEqual([
        'transaction',
        'transaction',
        'alone',
      ]);
      const dump = await dumpSchema(db.executor, schema);
      expect(dump.objects.get('index jobs_tenant_idx')).toMatch(/CREATE INDEX jobs_tenant_idx ON skiplock\.jobs/);
      expect(dump.invalidIndexes).toEqual([]);
      expect(dump.unvalidatedConstraints).toEqual([]);
      expect((await journalRows(schema)).at(-1)).toMatchObject({ tag: '0001_expand', steps_done: null });
      // And --check reports the extra objects as drift from this version's schema.
      expect((await checkSchema(db.executor, schema)).unexpected).toEqual(
        expect.arrayContaining(['constraint jobs.jobs_tenant_check', 'index jobs_tenant_idx']),
      );
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('lets four migrators apply a migration of every step kind at once: each step once, the index valid', async () => {
    const schema = await baselineSchema('online-concurrent');
    const connections = [openMigrator(), openMigrator(), openMigrator(), openMigrator()];
    try {
      const results = await Promise.all(connections.map((c) => applyMigrations(c, [baseline, expand], { schema })));
      expect(results.flatMap((r) => r.applied).length).toBeGreaterThanOrEqual(1);
      const dump = await dumpSchema(db.executor, schema);
      expect(dump.objects.has('index jobs_tenant_idx')).toBe(true);
      expect(dump.invalidIndexes).toEqual([]);
      expect(dump.unvalidatedConstraints).toEqual([]);
      expect((await journalRows(schema)).at(-1)).toMatchObject({ tag: '0001_expand', steps_done: null });
    } finally {
      await Promise.all(connections.map((c) => c.close()));
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('resumes an interrupted migration after its last recorded step', async () => {
    const schema = await baselineSchema('online-resume');
    try {
      // Step 1 (ADD COLUMN and ADD CONSTRAINT, not repeatable) ran and was recorded before the process died.
      await admin.query(`alter table "${schema}".jobs add column tenant text`);
      await admin.query(`alter table "${schema}".jobs add constraint jobs_tenant_check check (tenant <> '') not valid`);
      await admin.query(`insert into "${schema}".skiplock_migrations (tag, hash, steps_done) values ($1, $2, 1)`, [
        expand.tag,
        expand.hash,
      ]);
      expect((await applyMigrations(db, [baseline, expand], { schema })).applied).toEqual(['0001_expand']);
      const constraint = await admin.query(
        `select convalidated from pg_constraint where conname = 'jobs_tenant_check' and connamespace = $1::regnamespace`,
        [schema],
      );
      expect(constraint.rows).toEqual([{ convalidated: true }]);
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('waits for a lock at most lock_timeout, lets enqueues through meanwhile, and retries until it gets it', async () => {
    const schema = await baselineSchema('online-lock');
    const reader = await admin.connect();
    try {
      // A long read on jobs: an ALTER TABLE must wait for it, and whatever queues behind the ALTER waits too.
      await reader.query(`begin; select count(*) from "${schema}".jobs`);
      const events: MigrationEvent[] = [];
      const addColumn = testMigration('0001_add_column', ['ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text;']);
      const migrating = applyMigrations(db, [baseline, addColumn], {
        schema,
        lockTimeoutMs: 100,
        retryDelayMs: 20,
        lockAttempts: 1000,
        onProgress: (e) => events.push(e),
      });
      // Enqueues keep going while the read is open and the migration keeps retrying: each insert
      // commits before the read ends (one queued behind the ALTER waits out its lock_timeout, never
      // the read). A migrator that kept its place in the lock queue would hold them until the read
      // ends, which here is never: the test would time out.
      for (let i = 0; i < 5; i++) {
        await db.db.execute(sql.raw(`insert into "${schema}".jobs (kind) values ('during')`));
      }
      // Two lost lock waits, however long a loaded machine takes (expect.poll would give up after 1 s).
      while (events.filter((e) => e.type === 'lock_timeout').length < 2) await delay(5);
      const during = await admin.query(`select count(*)::int as n from "${schema}".jobs where kind = 'during'`);
      expect(during.rows[0].n).toBe(5);
      await reader.query('commit');
      expect((await migrating).applied).toEqual(['0001_add_column']);
      const columns = await admin.query(
        `select 1 from pg_attribute where attrelid = '"${schema}".jobs'::regclass and attname = 'tenant'`,
      );
      expect(columns.rowCount).toBe(1);
    } finally {
      await reader.query('rollback').catch(() => {});
      reader.release();
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('gives up after its attempts with a clear error, leaving nothing of the step applied', async () => {
    const schema = await baselineSchema('online-give-up');
    const reader = await admin.connect();
    try {
      await reader.query(`begin; select count(*) from "${schema}".jobs`);
      const addColumn = testMigration('0001_add_column', [
        'ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text;',
        'ALTER TABLE "skiplock"."jobs" ADD COLUMN "region" text;',
      ]);
      const error = await applyMigrations(db, [baseline, addColumn], {
        schema,
        lockTimeoutMs: 50,
        retryDelayMs: 10,
        lockAttempts: 3,
      }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'migration_lock_timeout' });
      expect((error as Error).message).toMatch(/0001_add_column .* within 50 ms in 3 attempts/);
      await reader.query('commit');
      const columns = await admin.query(
        `select attname from pg_attribute where attrelid = '"${schema}".jobs'::regclass and attname in ('tenant', 'region')`,
      );
      expect(columns.rows).toEqual([]);
      expect((await journalRows(schema)).map((r) => r.tag)).toEqual(['0000_baseline']);
    } finally {
      await reader.query('rollback').catch(() => {});
      reader.release();
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('rebuilds concurrently an INVALID index an interrupted build left on an up-to-date schema; enqueues go on', async () => {
    const schema = await baselineSchema('online-rebuild');
    const reader = await admin.connect();
    try {
      await admin.query(`drop index "${schema}".jobs_deadline_idx`);
      await interruptIndexBuild(
        schema,
        `create index concurrently jobs_deadline_idx on "${schema}".jobs (deadline) where state = 'queued' and deadline is not null`,
      );
      expect((await dumpSchema(db.executor, schema)).invalidIndexes).toEqual(['jobs_deadline_idx']);

      // A long read on jobs: the concurrent drop and build wait for it, and let enqueues pass meanwhile.
      await reader.query(`begin; select count(*) from "${schema}".jobs`);
      const events: MigrationEvent[] = [];
      const migrating = migrate(db, { schema, onProgress: (e) => events.push(e) });
      await expect
        .poll(() => waitingOnLock('drop index concurrently', `"${schema}"."jobs_deadline_idx"`), { timeout: 10_000 })
        .toBe(true);
      // Would hang here if the drop held a lock that writes queue behind.
      await db.db.execute(sql.raw(`insert into "${schema}".jobs (kind) values ('during')`));
      await reader.query('commit');

      expect(await migrating).toMatchObject({ applied: [], rebuiltIndexes: ['jobs_deadline_idx'] });
      expect(events).toContainEqual({ type: 'invalid_index_dropped', tag: null, index: 'jobs_deadline_idx' });
      expect((await dumpSchema(db.executor, schema)).invalidIndexes).toEqual([]);
      expect(hasDrift(await checkSchema(db.executor, schema))).toBe(false);
      expect((await migrate(db, { schema })).rebuiltIndexes).toEqual([]);
    } finally {
      await reader.query('rollback').catch(() => {});
      reader.release();
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('reports a statement the database rejects as that step failing, with its SQLSTATE; nothing of it is kept', async () => {
    const schema = await baselineSchema('online-failed');
    try {
      const clash = testMigration('0001_clash', [
        'ALTER TABLE "skiplock"."jobs" ADD COLUMN "tenant" text;',
        'CREATE TABLE "skiplock"."activity_rollups" ("id" integer);',
      ]);
      const error = await applyMigrations(db, [baseline, clash], { schema }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'migration_failed', tag: '0001_clash', sqlState: '42P07' });
      expect((error as Error).message).toMatch(
        /^migration 0001_clash of skiplock schema ".*" failed at step 1 of 1: relation "activity_rollups" already exists \(SQLSTATE 42P07\)/,
      );
      expect((error as Error).message).toMatch(/already holds an object this migration creates/);
      const columns = await admin.query(
        `select 1 from pg_attribute where attrelid = '"${schema}".jobs'::regclass and attname = 'tenant'`,
      );
      expect(columns.rowCount).toBe(0);
      expect((await journalRows(schema)).map((r) => r.tag)).toEqual(['0000_baseline']);
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('finds an INVALID index an interrupted build left and builds it again', async () => {
    const schema = await baselineSchema('online-invalid');
    try {
      // A concurrent unique build over duplicates fails and leaves the index INVALID, as a killed build does.
      await admin.query(`insert into "${schema}".jobs (kind, correlation_id) values ('a', 'same'), ('b', 'same')`);
      await admin
        .query(`create unique index concurrently jobs_correlation_uq on "${schema}".jobs (correlation_id)`)
        .catch(() => {});
      expect((await dumpSchema(db.executor, schema)).invalidIndexes).toEqual(['jobs_correlation_uq']);
      expect((await checkSchema(db.executor, schema)).invalidIndexes).toEqual(['jobs_correlation_uq']);
      await admin.query(`delete from "${schema}".jobs where kind = 'b'`);

      const events: MigrationEvent[] = [];
      const unique = testMigration('0001_unique', [
        'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "jobs_correlation_uq" ON "skiplock"."jobs" USING btree ("correlation_id");',
      ]);
      await applyMigrations(db, [baseline, unique], { schema, onProgress: (e) => events.push(e) });
      expect(events).toContainEqual({
        type: 'invalid_index_dropped',
        tag: '0001_unique',
        index: 'jobs_correlation_uq',
      });
      expect((await dumpSchema(db.executor, schema)).invalidIndexes).toEqual([]);
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });
});

describe("a schema made without skiplock's journal (the Drizzle path, or by hand)", () => {
  const journalExists = async (schema: string) =>
    (await admin.query('select to_regclass($1) is not null as exists', [`"${schema}".skiplock_migrations`])).rows[0]
      .exists;

  it("is recorded in the journal when it is this version's schema, applying nothing", async () => {
    const schema = await baselineSchema('unjournaled-match');
    try {
      await admin.query(`drop table "${schema}".skiplock_migrations`);
      const events: MigrationEvent[] = [];
      const result = await migrate(db, { schema, onProgress: (e) => events.push(e) });
      expect(result).toMatchObject({ applied: [], recorded: ['0000_baseline'] });
      expect(events.filter((e) => e.type === 'step')).toEqual([]);
      expect(await journalRows(schema)).toEqual([
        { tag: '0000_baseline', hash: MIGRATIONS[0]?.hash, steps_done: null },
      ]);
      expect(hasDrift(await checkSchema(db.executor, schema))).toBe(false);
      expect(await migrate(db, { schema })).toMatchObject({ applied: [], recorded: [] });
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });

  it('is refused when it differs, naming what differs; nothing is written', async () => {
    const schema = await baselineSchema('unjournaled-drift');
    try {
      await admin.query(`drop table "${schema}".skiplock_migrations`);
      await admin.query(`drop index "${schema}".jobs_deadline_idx`);
      const error = await migrate(db, { schema }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'unjournaled_schema' });
      expect((error as Error).message).toMatch(
        /missing: index jobs_deadline_idx on table jobs: expected "CREATE INDEX/,
      );
      expect((error as Error).message).toMatch(/nothing was written/);
      expect(await journalExists(schema)).toBe(false);
    } finally {
      await admin.query(`drop schema if exists "${schema}" cascade`);
    }
  });
});
