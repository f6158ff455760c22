import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { AnyPgDatabase, SkiplockDb } from './connect.js';
import { queryRows, toSkiplockError } from './execute.js';
import { MIGRATIONS } from './migrations.generated.js';

export interface Migration {
  tag: string;
  /** sha256 of the migration file; identifies it in the journal. */
  hash: string;
  statements: string[];
}

export interface MigrateOptions {
  /** The Postgres schema that holds skiplock's tables. @defaultValue 'skiplock' */
  schema?: string;
}

export interface MigrateResult {
  schema: string;
  /** Tags of the migrations this call applied (empty when already up to date). */
  applied: string[];
}

const JOURNAL = 'skiplock_migrations';

/**
 * Applies skiplock's migrations to `schema`. Idempotent; concurrent callers serialize on a
 * transaction-scoped advisory lock, so two deploys migrating at once cannot interleave.
 * The journal lives inside the skiplock schema, apart from the application's own drizzle
 * journal. Interactive drivers apply everything in one transaction; neon-http applies it
 * as one batch (also one transaction).
 */
export async function migrate(conn: SkiplockDb, options: MigrateOptions = {}): Promise<MigrateResult> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  try {
    const applied = conn.interactiveTransactions
      ? await migrateInTransaction(conn.db, schema)
      : await migrateInBatch(conn.db as unknown as NeonHttpDatabase, schema);
    return { schema, applied };
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/** The migration's SQL for `schema`: migrations are written against "skiplock". */
export function renderStatement(statement: string, schema: string): string {
  return statement
    .replace(/CREATE SCHEMA "skiplock"/g, 'CREATE SCHEMA IF NOT EXISTS "skiplock"')
    .replace(/"skiplock"/g, `"${schema}"`);
}

function lockStatement(schema: string) {
  return sql`select pg_advisory_xact_lock(hashtext(${`skiplock:migrate:${schema}`}))`;
}

function bootstrapStatements(schema: string) {
  return [
    sql.raw(`create schema if not exists "${schema}"`),
    sql.raw(
      `create table if not exists "${schema}"."${JOURNAL}" (
        id serial primary key,
        tag text not null,
        hash text not null unique,
        applied_at timestamptz not null default now()
      )`,
    ),
  ];
}

function appliedHashesQuery(schema: string) {
  return sql.raw(`select hash from "${schema}"."${JOURNAL}"`);
}

function journalInsert(schema: string, migration: Migration) {
  return sql`insert into ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} (tag, hash) values (${migration.tag}, ${migration.hash})`;
}

async function migrateInTransaction(db: AnyPgDatabase, schema: string): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.execute(lockStatement(schema));
    for (const statement of bootstrapStatements(schema)) await tx.execute(statement);
    const done = new Set(
      (await queryRows<{ hash: string }>(tx, appliedHashesQuery(schema), schema)).map((r) => r.hash),
    );
    const pending = MIGRATIONS.filter((m) => !done.has(m.hash));
    for (const migration of pending) {
      for (const statement of migration.statements) await tx.execute(sql.raw(renderStatement(statement, schema)));
      await tx.execute(journalInsert(schema, migration));
    }
    return pending.map((m) => m.tag);
  });
}

async function migrateInBatch(db: NeonHttpDatabase, schema: string): Promise<string[]> {
  const [lock, ...bootstrap] = [lockStatement(schema), ...bootstrapStatements(schema)];
  await db.batch([db.execute(lock), ...bootstrap.map((s) => db.execute(s))]);
  const readPending = async () => {
    const done = new Set(
      (await queryRows<{ hash: string }>(db, appliedHashesQuery(schema), schema)).map((r) => r.hash),
    );
    return MIGRATIONS.filter((m) => !done.has(m.hash));
  };
  const pending = await readPending();
  if (pending.length === 0) return [];
  const statements = pending.flatMap((m) => [
    ...m.statements.map((s) => sql.raw(renderStatement(s, schema))),
    journalInsert(schema, m),
  ]);
  try {
    await db.batch([db.execute(lock), ...statements.map((s) => db.execute(s))]);
  } catch (err) {
    // A concurrent migrator may have applied the same migrations between our read and our
    // batch (the batch then fails on existing objects and rolls back whole). If nothing is
    // pending any more, the schema is up to date and this run has nothing to do.
    if ((await readPending()).length === 0) return [];
    throw err;
  }
  return pending.map((m) => m.tag);
}
