import { type SQL, sql } from 'drizzle-orm';
import {
  DatabaseError,
  MigrationFailedError,
  MigrationLockTimeoutError,
  SkiplockError,
  UnjournaledSchemaError,
} from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from './connection-options.js';
import { driverFailure, isConnectionFailure, queryRows, sqlStateOf, toSkiplockError } from './execute.js';
import type { Executor } from './executor.js';
import {
  bootstrapStatements,
  type JournalEntry,
  journalAdoption,
  journalRecord,
  lockStatement,
  pendingMigrations,
  readJournalState,
  refuseLegacyJournal,
} from './migration-journal.js';
import { type Migration, planSteps, renderStatement, type Step } from './migration-plan.js';
import { MIGRATIONS } from './migrations.generated.js';
import { describeDriftDetail, schemaDrift } from './schema-drift.js';
import { concurrentIndexBuild, dumpSchema, expectedSchema, tablesOf } from './schema-dump.js';

export type { Migration } from './migration-plan.js';
export { renderStatement } from './migration-plan.js';

export interface MigrateOptions {
  /** The Postgres schema that holds skiplock's tables. @defaultValue 'skiplock' */
  schema?: string;
  /**
   * How long a step waits for a lock on a table (`lock_timeout`) before it gives up, rolls back and
   * tries again later. Enqueues and claims that arrive while it waits queue behind it for at most
   * this long. @defaultValue 1000
   */
  lockTimeoutMs?: number;
  /** How many times a step that lost its wait for a lock is tried before migrate fails. @defaultValue 20 */
  lockAttempts?: number;
  /** The wait before the second try; it doubles with each try, up to 10 s, with jitter. @defaultValue 500 */
  retryDelayMs?: number;
  /**
   * `statement_timeout` of the statements of each transaction step (0: none). A concurrent index
   * build runs with the connection's own (it is a statement of its own, with no session setting
   * to carry one): `skiplock migrate` connects with none. @defaultValue 0
   */
  statementTimeoutMs?: number;
  /** Told about each step, each lost lock wait and each rebuilt index (the CLI prints them). */
  onProgress?: (event: MigrationEvent) => void;
}

export type MigrationEvent =
  | { type: 'step'; tag: string; step: number; of: number; kind: Step['kind'] }
  | { type: 'lock_timeout'; tag: string; step: number; attempt: number; retryInMs: number }
  /** `tag` null: found on a schema whose migrations were all applied (see rebuildInvalidIndexes). */
  | { type: 'invalid_index_dropped'; tag: string | null; index: string };

export interface MigrateResult {
  schema: string;
  /** Tags of the migrations this call applied or finished (empty when already up to date). */
  applied: string[];
  /**
   * Tags this call recorded in the journal without running them: the schema held this version's
   * schema already, with no journal (made by the Drizzle path, or by hand).
   */
  recorded: string[];
  /** Indexes of this version's schema an interrupted build had left INVALID: dropped and built again. */
  rebuiltIndexes: string[];
}

interface Settings {
  schema: string;
  lockTimeoutMs: number;
  lockAttempts: number;
  retryDelayMs: number;
  statementTimeoutMs: number;
  onProgress: (event: MigrationEvent) => void;
}

/**
 * Applies skiplock's migrations to `schema`, online: each step commits on its own under
 * `lock_timeout` and is retried when it loses (see db/migration-plan.ts), so a migration never
 * makes enqueues and claims queue behind it for longer than the lock timeout. Idempotent;
 * concurrent migrators take turns, step by step, on a transaction-scoped advisory lock. The journal lives inside the skiplock
 * schema, apart from the application's own drizzle journal.
 *
 * A journal entry whose content differs from this version's migration of the same tag
 * (MigrationMismatchError), or a tag this version does not know (MigratedByNewerVersionError),
 * stops the run before anything is applied. A schema that holds skiplock's tables but no journal
 * (the Drizzle path) is recorded when it is this version's schema and refused otherwise
 * (UnjournaledSchemaError). A statement the database rejects stops the run at its step
 * (MigrationFailedError). Every run ends by building again any index of this version's schema that
 * an interrupted build left INVALID.
 */
export async function migrate(conn: SkiplockConnection, options: MigrateOptions = {}): Promise<MigrateResult> {
  return applyMigrations(conn, MIGRATIONS, options);
}

/** migrate() with another list of migrations: the tests and the upgrade drill bring their own. */
export async function applyMigrations(
  conn: SkiplockConnection,
  migrations: readonly Migration[],
  options: MigrateOptions = {},
): Promise<MigrateResult> {
  const settings: Settings = {
    schema: assertSchemaName(options.schema ?? DEFAULT_SCHEMA),
    lockTimeoutMs: options.lockTimeoutMs ?? 1000,
    lockAttempts: options.lockAttempts ?? 20,
    retryDelayMs: options.retryDelayMs ?? 500,
    statementTimeoutMs: options.statementTimeoutMs ?? 0,
    onProgress: options.onProgress ?? (() => {}),
  };
  // This version's schema (db/schema.sql) is what the list creates only when it is this version's list;
  // the tests' and the upgrade drill's lists have none to compare a schema with.
  const same = migrations.length === MIGRATIONS.length && migrations.every((m, i) => m.hash === MIGRATIONS[i]?.hash);
  const expected = same ? expectedSchema() : undefined;
  try {
    const state = await readJournalState(conn.executor, settings.schema, tablesOf(expectedSchema()));
    const journal = state.entries ?? [];
    refuseLegacyJournal(journal, settings.schema);
    const unjournaled = journal.length === 0 && state.holdsTables;
    const recorded = unjournaled ? await recordExistingSchema(conn, migrations, expected, settings) : [];
    const applied = unjournaled ? [] : await migrateSteps(conn, journal, migrations, settings);
    const rebuiltIndexes = expected ? await rebuildInvalidIndexes(conn.executor, expected, settings) : [];
    return { schema: settings.schema, applied, recorded, rebuiltIndexes };
  } catch (err) {
    throw toSkiplockError(err, settings.schema);
  }
}

/**
 * A schema that holds skiplock's tables and no journal entry: made by the Drizzle path (drizzle-kit
 * and the objects migration) or by hand, or left so by a run that failed before. When it is exactly
 * this version's schema, every migration is recorded as applied and none runs; otherwise nothing is
 * written and the error names what differs and what to do. Storage settings tuned by hand and an
 * INVALID index (built again below) do not stand in the way.
 */
async function recordExistingSchema(
  conn: SkiplockConnection,
  migrations: readonly Migration[],
  expected: Map<string, string> | undefined,
  s: Settings,
): Promise<string[]> {
  if (!expected) throw new UnjournaledSchemaError(s.schema, ['these migrations have no schema to compare it with']);
  const drift = schemaDrift(await dumpSchema(conn.executor, s.schema), expected);
  const differences = [
    ...drift.details.map(describeDriftDetail),
    ...drift.unvalidatedConstraints.map((name) => `constraint not validated: ${name}`),
  ];
  if (differences.length > 0) throw new UnjournaledSchemaError(s.schema, differences);
  await inTransaction(
    conn,
    s,
    migrations.map((m) => journalAdoption(s.schema, m)),
    undefined,
  );
  return migrations.map((m) => m.tag);
}

/**
 * Every driver, and behind PgBouncer in transaction mode: no session state. Each transaction step
 * takes the migration's transaction-scoped advisory lock first and checks in the journal that no
 * other migrator did the step meanwhile; a concurrent index build is a single statement of its own.
 */
async function migrateSteps(
  conn: SkiplockConnection,
  journal: readonly JournalEntry[],
  migrations: readonly Migration[],
  s: Settings,
): Promise<string[]> {
  const applied: string[] = [];
  for (const { migration, stepsDone } of pendingMigrations(journal, migrations, s.schema)) {
    const steps = planSteps(migration.statements);
    let finished = false;
    for (let k = stepsDone; k < steps.length; k++) {
      const step = steps[k] as Step;
      const record = journalRecord(s.schema, migration, k + 1 === steps.length ? null : k + 1);
      const done = { migration, step: k };
      s.onProgress({ type: 'step', tag: migration.tag, step: k + 1, of: steps.length, kind: step.kind });
      try {
        if (step.kind === 'alone') {
          await buildAlone(conn.executor, migration.tag, step, s);
          finished = await inTransaction(conn, s, [record], done);
        } else {
          const statements = step.statements.map((statement) => sql.raw(renderStatement(statement, s.schema)));
          finished = await withLockRetries(migration.tag, k + 1, s, () =>
            inTransaction(conn, s, [...statements, record], done),
          );
        }
      } catch (err) {
        throw stepFailure(err, s.schema, { tag: migration.tag, step: k + 1, of: steps.length });
      }
    }
    // Applied by this call when it wrote the last step (a concurrent migrator may have written it).
    if (finished) applied.push(migration.tag);
  }
  return applied;
}

/**
 * A statement the server rejected, as the step that failed (not as a lost connection, which stays a
 * DatabaseError, nor a named error, which stays itself).
 */
function stepFailure(err: unknown, schema: string, where: { tag: string; step: number; of: number }): unknown {
  if (err instanceof SkiplockError && !(err instanceof DatabaseError)) return err;
  const failure = driverFailure(err);
  return isConnectionFailure(failure.sqlState) ? err : new MigrationFailedError(schema, where, failure);
}

/**
 * Runs `statements` in one transaction after the migration lock, under lock_timeout and
 * statement_timeout (SET LOCAL: nothing outlives the transaction). The journal is created in the
 * same transaction, so a run that fails leaves none behind. `done` names the step: when the
 * journal already records it (another migrator was faster), nothing runs. neon-http sends it as one
 * batch, which cannot read between statements: there a step another migrator did fails on its
 * existing objects and rolls back, and the journal, read again, says it is done.
 */
async function inTransaction(
  conn: SkiplockConnection,
  s: Settings,
  statements: SQL[],
  done: { migration: Migration; step: number } | undefined,
): Promise<boolean> {
  const lock = lockStatement(s.schema);
  const timeouts = [
    sql`select set_config('lock_timeout', ${`${s.lockTimeoutMs}ms`}, true)`,
    sql`select set_config('statement_timeout', ${String(s.statementTimeoutMs)}, true)`,
  ];
  const setup = [...timeouts, ...bootstrapStatements(s.schema)];
  const { transaction } = conn.executor;
  if (transaction) {
    return transaction(async (tx) => {
      await tx.query(lock);
      for (const statement of setup) await tx.query(statement);
      if (done && (await stepDone(tx, s.schema, done))) return false;
      for (const statement of statements) await tx.query(statement);
      return true;
    });
  }
  try {
    await conn.executor.batch([lock, ...setup, ...statements]);
    return true;
  } catch (err) {
    if (done && (await stepDone(conn.executor, s.schema, done))) return false;
    throw err;
  }
}

async function stepDone(db: Executor, schema: string, done: { migration: Migration; step: number }) {
  const { entries } = await readJournalState(db, schema, []);
  const entry = entries?.find((e) => e.tag === done.migration.tag);
  return entry !== undefined && (entry.steps_done === null || entry.steps_done > done.step);
}

/**
 * A concurrent index build, outside any transaction (its lock lets enqueues and claims pass, and it
 * waits for the open transactions on the table by design: no lock_timeout). An INVALID index of
 * that name is either being built by another migrator right now (then this one waits for it) or
 * what an interrupted build left — skipped by reads but slowing every write: dropped and built
 * again. It ends when the index is valid; true when it dropped an INVALID one on the way.
 */
async function buildAlone(
  db: Executor,
  tag: string | null,
  step: Step & { kind: 'alone' },
  s: Settings,
): Promise<boolean> {
  let dropped = false;
  const index = step.index;
  const state = async () => {
    if (!index) return 'absent';
    const [row] = await queryRows<{ valid: boolean; building: boolean }>(
      db,
      sql`select x.indisvalid as valid,
            exists (select 1 from pg_stat_progress_create_index p where p.index_relid = x.indexrelid) as building
          from pg_index x join pg_class i on i.oid = x.indexrelid
          where i.relname = ${index} and i.relnamespace = ${s.schema}::regnamespace`,
      s.schema,
    );
    return !row ? 'absent' : row.valid ? 'valid' : row.building ? 'building' : 'invalid';
  };
  for (let attempt = 1; ; attempt++) {
    const now = await state();
    if (now === 'valid') return dropped;
    if (now === 'building') {
      await new Promise((resolve) => setTimeout(resolve, Math.min(s.retryDelayMs, 1_000)));
      continue;
    }
    try {
      if (now === 'invalid') {
        await db.query(sql.raw(`drop index concurrently if exists "${s.schema}"."${index}"`));
        dropped = true;
        s.onProgress({ type: 'invalid_index_dropped', tag, index: index as string });
      }
      await db.query(sql.raw(renderStatement(step.statement, s.schema)));
    } catch (err) {
      // Another migrator's build of the same index started at the same instant: its name is taken,
      // the two builds deadlocked (each waits for the other's snapshot) and this one was chosen to
      // fail, or both dropped the same invalid index or wrote one catalog row ("tuple concurrently
      // updated", XX000). Look again: the other build is running, done, or left the index to rebuild.
      const raced = ['42P07', '23505', '40P01'].includes(sqlStateOf(err) ?? '') || concurrentlyUpdated(err);
      if (!raced || attempt > 10) throw err;
      // A random pause, so that migrators that collided do not collide again in step.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(s.retryDelayMs, 1_000)));
    }
    if (!index) return dropped;
  }
}

/**
 * An index of this version's schema that an interrupted build left INVALID — a deploy killed during
 * a concurrent build, or an operator's — is skipped by every read and still slows every write. Every
 * run looks for them, so an up-to-date schema is repaired too, and drops and builds each again as a
 * migration's index step does (buildAlone): concurrently, with locks that let enqueues and claims
 * pass. An INVALID index this version does not define is not skiplock's to drop (--check names it).
 */
async function rebuildInvalidIndexes(db: Executor, expected: Map<string, string>, s: Settings): Promise<string[]> {
  const invalid = await queryRows<{ name: string }>(
    db,
    sql`select i.relname as name from pg_index x join pg_class i on i.oid = x.indexrelid
        where i.relnamespace = ${s.schema}::regnamespace and not x.indisvalid order by i.relname`,
    s.schema,
  );
  const rebuilt: string[] = [];
  for (const { name } of invalid) {
    const definition = expected.get(`index ${name}`);
    if (definition === undefined) continue;
    const step = { kind: 'alone', statement: concurrentIndexBuild(definition, s.schema), index: name } as const;
    if (await buildAlone(db, null, step, s)) rebuilt.push(name);
  }
  return rebuilt;
}

/** PostgreSQL's internal error for two sessions writing one catalog row at once (not a SQLSTATE of its own). */
function concurrentlyUpdated(err: unknown): boolean {
  if (sqlStateOf(err) !== 'XX000') return false;
  // The driver's message, under Drizzle's "Failed query: …" wrapper.
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    if (/tuple concurrently updated/.test(e.message)) return true;
  }
  return false;
}

async function withLockRetries<T>(tag: string, step: number, s: Settings, work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      const lost = ['55P03', '40P01'].includes(sqlStateOf(err) ?? '');
      if (!lost) throw err;
      if (attempt >= s.lockAttempts) throw new MigrationLockTimeoutError(s.schema, tag, attempt, s.lockTimeoutMs);
      const retryInMs = Math.round(Math.min(s.retryDelayMs * 2 ** (attempt - 1), 10_000) * (0.5 + Math.random() / 2));
      s.onProgress({ type: 'lock_timeout', tag, step, attempt, retryInMs });
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}
