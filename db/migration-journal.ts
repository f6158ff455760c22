import { sql } from 'drizzle-orm';
import { LegacyMigrationsError, MigratedByNewerVersionError, MigrationMismatchError } from '../base/errors.js';
import { queryRows } from './execute.js';
import type { Executor } from './executor.js';
import type { Migration } from './migration-plan.js';

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

export interface JournalState {
  /** The journal's entries; undefined when the schema has no journal. */
  entries: JournalEntry[] | undefined;
  /** Whether the schema holds any of skiplock's tables (made by migrate, drizzle-kit or by hand). */
  holdsTables: boolean;
}

/**
 * The journal of `schema`, read without creating anything, and whether the schema holds any of
 * `tables`: a schema with skiplock's tables and an empty or no journal was made without migrate().
 */
export async function readJournalState(db: Executor, schema: string, tables: readonly string[]): Promise<JournalState> {
  const [state] = await queryRows<{ journal: boolean; holds_tables: boolean }>(
    db,
    sql`select to_regclass(${`"${schema}"."${JOURNAL}"`}) is not null as journal,
      exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where n.nspname = ${schema} and c.relkind in ('r', 'p')
                and c.relname = any(${sql.param(tables)}::text[])) as holds_tables`,
    schema,
  );
  const entries = state?.journal ? await readJournal(db, schema) : undefined;
  return { entries, holdsTables: state?.holds_tables ?? false };
}

/** The journal's entries (the schema has one). */
export function readJournal(db: Executor, schema: string): Promise<JournalEntry[]> {
  // steps_done read through to_jsonb: a journal written before steps were tracked lacks the column,
  // and reading must not change it (bootstrapStatements adds it with the next step).
  return queryRows<JournalEntry>(
    db,
    sql.raw(
      `select tag, hash, (to_jsonb(j) ->> 'steps_done')::integer as steps_done from "${schema}"."${JOURNAL}" j order by id`,
    ),
    schema,
  );
}

/** Records that `stepsDone` steps of a migration are applied (null: all of them). */
export function journalRecord(schema: string, migration: Migration, stepsDone: number | null) {
  return sql`insert into ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} (tag, hash, steps_done)
    values (${migration.tag}, ${migration.hash}, ${stepsDone})
    on conflict (tag) do update set steps_done = excluded.steps_done, applied_at = now()`;
}

/** Records a migration whose objects the schema already has (made by the Drizzle path): applied whole. */
export function journalAdoption(schema: string, migration: Migration) {
  return sql`insert into ${sql.identifier(schema)}.${sql.identifier(JOURNAL)} (tag, hash, steps_done)
    values (${migration.tag}, ${migration.hash}, null)
    on conflict (tag) do nothing`;
}

export function lockStatement(schema: string) {
  return sql`select pg_advisory_xact_lock(hashtext(${`skiplock:migrate:${schema}`}))`;
}

/**
 * The pre-release chain squashed into 0000_baseline. Its schema cannot be carried over: the
 * baseline has tables and indexes the chain never made (activity_rollups, jobs_dead_idx). A
 * journal that holds any of its tags is refused with what to do.
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

/** Throws when the journal is the pre-release chain's (whole or part of it). */
export function refuseLegacyJournal(journal: readonly JournalEntry[], schema: string): void {
  const legacy = new Set<string>(LEGACY_TAGS);
  const tags = journal.map((entry) => entry.tag).filter((tag) => legacy.has(tag));
  if (tags.length > 0)
    throw new LegacyMigrationsError(schema, tags.sort().at(-1) ?? '', tags.length === LEGACY_TAGS.length);
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
