import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { MigratedByNewerVersionError, MigrationMismatchError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { AnyPgDatabase, SkiplockDb } from './connect.js';
import { queryRows, toSkiplockError } from './execute.js';
import { MIGRATIONS } from './migrations.generated.js';

export interface Migration {
  /** The migration's name; identifies it in the journal. */
  tag: string;
  /** sha256 of the migration file: an applied migration whose file changed since is refused. */
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
 *
 * Migrations are tracked by tag. A journal entry whose content differs from this version's
 * migration of the same tag (MigrationMismatchError), or a tag this version does not know
 * (MigratedByNewerVersionError), stops the run before anything is applied.
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
        tag text not null unique,
        hash text not null,
        applied_at timestamptz not null default now()
      )`,
    ),
  ];
}

/**
 * The journal, one row per tag (the latest: journals written before tracking by tag may hold
 * an edited migration twice). Tables created by earlier versions have `hash` unique and `tag`
 * not; both shapes read the same.
 */
function journalQuery(schema: string) {
  return sql.raw(`select distinct on (tag) tag, hash from "${schema}"."${JOURNAL}" order by tag, id desc`);
}

/** The migrations still to apply, after checking the journal against this version's migrations. */
export function pendingMigrations(
  journal: readonly { tag: string; hash: string }[],
  migrations: readonly Migration[],
  schema: string,
): Migration[] {
  const known = new Map(migrations.map((m) => [m.tag, m]));
  for (const entry of journal) {
    const migration = known.get(entry.tag);
    if (!migration) throw new MigratedByNewerVersionError(schema, entry.tag);
    if (migration.hash !== entry.hash) throw new MigrationMismatchError(schema, entry.tag);
  }
  const applied = new Set(journal.map((entry) => entry.tag));
  return migrations.filter((m) => !applied.has(m.tag));
}

async function readPending(db: AnyPgDatabase, schema: string): Promise<Migration[]> {
  return pendingMigrations(
    await queryRows<{ tag: string; hash: string }>(db, journalQuery(schema), schema),
    MIGRATIONS,
    schema,
  );
}

function journalInsert(schema: string, migration: Migration) {
  return sql`insert into ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} (tag, hash) values (${migration.tag}, ${migration.hash})`;
}

async function migrateInTransaction(db: AnyPgDatabase, schema: string): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.execute(lockStatement(schema));
    for (const statement of bootstrapStatements(schema)) await tx.execute(statement);
    const pending = await readPending(tx, schema);
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
  const pending = await readPending(db, schema);
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
    if ((await readPending(db, schema)).length === 0) return [];
    throw err;
  }
  return pending.map((m) => m.tag);
}
