import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { LegacyMigrationsError, MigratedByNewerVersionError, MigrationMismatchError } from '../base/errors.js';
import { type Migration, renderStatement } from './migration-plan.js';

/**
 * The migration journal, inside the skiplock schema (apart from the application's own drizzle
 * journal): one row per migration; `steps_done` counts the steps of a migration still under way
 * and is null once all are applied.
 */
export const JOURNAL = 'skiplock_migrations';

export interface JournalEntry {
  tag: string;
  hash: string;
  steps_done: number | null;
}

export interface PendingMigration {
  migration: Migration;
  /** Steps already applied by an earlier, interrupted run. */
  stepsDone: number;
}

export function bootstrapStatements(schema: string) {
  const journal = `"${schema}"."${JOURNAL}"`;
  return [
    sql.raw(`create schema if not exists "${schema}"`),
    sql.raw(
      `create table if not exists ${journal} (
        id serial primary key,
        tag text not null unique,
        hash text not null,
        applied_at timestamptz not null default now(),
        steps_done integer
      )`,
    ),
    // Journals written before steps were tracked lack the column: add it only then (an ALTER
    // takes its table's strongest lock, even when there is nothing to do).
    sql.raw(
      `do $$ begin
        if not exists (select 1 from pg_attribute where attrelid = '${journal}'::regclass and attname = 'steps_done') then
          alter table ${journal} add column steps_done integer;
        end if;
      end $$`,
    ),
  ];
}

export function journalQuery(schema: string) {
  return sql.raw(`select tag, hash, steps_done from "${schema}"."${JOURNAL}" order by id`);
}

/** Records that `stepsDone` steps of a migration are applied (null: all of them). */
export function journalRecord(schema: string, migration: Migration, stepsDone: number | null) {
  return sql`insert into ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} (tag, hash, steps_done)
    values (${migration.tag}, ${migration.hash}, ${stepsDone})
    on conflict (tag) do update set steps_done = excluded.steps_done, applied_at = now()`;
}

export function lockStatement(schema: string) {
  return sql`select pg_advisory_xact_lock(hashtext(${`skiplock:migrate:${schema}`}))`;
}

export function sessionLockStatement(schema: string, lock: boolean) {
  const key = `skiplock:migrate:${schema}`;
  return lock ? sql`select pg_advisory_lock(hashtext(${key}))` : sql`select pg_advisory_unlock(hashtext(${key}))`;
}

/**
 * The pre-release chain squashed into 0000_baseline. A schema migrated to its end has exactly the
 * baseline's tables (checked against db/schema.sql when the squash was made); it is carried over
 * by applying the baseline's objects part again (written to run again: OR REPLACE, DROP … IF
 * EXISTS), which adds what came since, and rewriting its journal to the baseline's entry. A schema
 * part-way through the chain is refused.
 */
export const LEGACY_TAGS = [
  '0000_jobs',
  '0001_views',
  '0002_cheap_stats',
  '0003_replace_dedupe_attempted',
  '0004_completed_counts',
  '0005_stats_count_deleted',
  '0006_invocations',
  '0007_claim_lanes',
  '0008_pauses',
  '0009_ordering_keys',
  '0010_stats_waiting',
  '0011_concurrency_limits',
  '0012_claim_room',
  '0013_ordering_blockers',
  '0014_destinations',
  '0015_rate_limits',
  '0016_job_results',
  '0017_schedules',
  '0018_dependencies',
  '0019_trace_context',
  '0020_console',
  '0021_fan_in_recheck',
] as const;

/** Whether the journal is the pre-release chain's, complete (true) — or throws when it is part of it. */
export function isLegacyJournal(journal: readonly JournalEntry[], schema: string): boolean {
  const legacy = new Set<string>(LEGACY_TAGS);
  const tags = journal.map((entry) => entry.tag).filter((tag) => legacy.has(tag));
  if (tags.length === 0) return false;
  if (tags.length === LEGACY_TAGS.length) return true;
  throw new LegacyMigrationsError(schema, tags.sort().at(-1) ?? '');
}

/**
 * sha256 of the baseline's table part (its statements before objectsFrom, joined by newlines) as
 * the chain's end had it. A baseline whose tables changed since cannot be carried over that way.
 */
const LEGACY_TABLES_SHA256 = '4967f3ea6b32466e301aecedb1975c7f5d28c72930a466d25fc6ba60d326a5b5';

export function carryOverStatements(schema: string, baseline: Migration) {
  const tables = baseline.statements.slice(0, baseline.objectsFrom).join('\n');
  if (createHash('sha256').update(tables).digest('hex') !== LEGACY_TABLES_SHA256)
    throw new LegacyMigrationsError(schema, LEGACY_TAGS[LEGACY_TAGS.length - 1] as string);
  return [
    ...baseline.statements.slice(baseline.objectsFrom).map((statement) => sql.raw(renderStatement(statement, schema))),
    sql`delete from ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} where tag = any(${sql.param([...LEGACY_TAGS])}::text[])`,
    journalRecord(schema, baseline, null),
  ];
}

/** The migrations still to apply, after checking the journal against this version's migrations. */
export function pendingMigrations(
  journal: readonly JournalEntry[],
  migrations: readonly Migration[],
  schema: string,
): PendingMigration[] {
  const known = new Map(migrations.map((m) => [m.tag, m]));
  const done = new Map<string, number | null>();
  for (const entry of journal) {
    const migration = known.get(entry.tag);
    if (!migration) throw new MigratedByNewerVersionError(schema, entry.tag);
    if (migration.hash !== entry.hash) throw new MigrationMismatchError(schema, entry.tag);
    done.set(entry.tag, entry.steps_done);
  }
  return migrations
    .filter((m) => !done.has(m.tag) || done.get(m.tag) !== null)
    .map((migration) => ({ migration, stepsDone: done.get(migration.tag) ?? 0 }));
}
