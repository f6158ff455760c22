import { type SQL, sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { MigrationLockTimeoutError, MigrationNeedsSessionError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { AnyPgDatabase, SkiplockDb } from './connect.js';
import { queryRows, sqlStateOf, toSkiplockError } from './execute.js';
import {
  bootstrapStatements,
  type JournalEntry,
  journalQuery,
  journalRecord,
  lockStatement,
  pendingMigrations,
  refuseLegacyJournal,
  sessionLockStatement,
} from './migration-journal.js';
import { type Migration, planSteps, renderStatement, type Step } from './migration-plan.js';
import { MIGRATIONS } from './migrations.generated.js';

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
   * `statement_timeout` of the migration's statements (0: none). A concurrent index build over
   * millions of rows takes minutes; it blocks no enqueue or claim meanwhile. @defaultValue 0
   */
  statementTimeoutMs?: number;
  /** Told about each step, each lost lock wait and each rebuilt index (the CLI prints them). */
  onProgress?: (event: MigrationEvent) => void;
}

export type MigrationEvent =
  | { type: 'step'; tag: string; step: number; of: number; kind: Step['kind'] }
  | { type: 'lock_timeout'; tag: string; step: number; attempt: number; retryInMs: number }
  | { type: 'invalid_index_dropped'; tag: string; index: string };

export interface MigrateResult {
  schema: string;
  /** Tags of the migrations this call applied or finished (empty when already up to date). */
  applied: string[];
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
 * concurrent migrators take turns on an advisory lock. The journal lives inside the skiplock
 * schema, apart from the application's own drizzle journal.
 *
 * A journal entry whose content differs from this version's migration of the same tag
 * (MigrationMismatchError), or a tag this version does not know (MigratedByNewerVersionError),
 * stops the run before anything is applied.
 */
export async function migrate(conn: SkiplockDb, options: MigrateOptions = {}): Promise<MigrateResult> {
  return applyMigrations(conn, MIGRATIONS, options);
}

/** migrate() with another list of migrations: the tests and the upgrade drill bring their own. */
export async function applyMigrations(
  conn: SkiplockDb,
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
  try {
    const applied = conn.session
      ? await conn.session((session) => migrateInSession(session, migrations, settings))
      : await migrateInBatches(conn.db as unknown as NeonHttpDatabase, migrations, settings);
    return { schema: settings.schema, applied };
  } catch (err) {
    throw toSkiplockError(err, settings.schema);
  }
}

/** pg, neon-ws: one session holds the advisory lock from the first read of the journal to the end. */
async function migrateInSession(db: AnyPgDatabase, migrations: readonly Migration[], s: Settings): Promise<string[]> {
  await db.execute(sql`select set_config('statement_timeout', ${String(s.statementTimeoutMs)}, false)`);
  await db.execute(sessionLockStatement(s.schema, true));
  try {
    for (const statement of bootstrapStatements(s.schema)) await db.execute(statement);
    const journal = await readJournal(db, s.schema);
    refuseLegacyJournal(journal, s.schema);
    const pending = pendingMigrations(journal, migrations, s.schema);
    for (const { migration, stepsDone } of pending) {
      const steps = planSteps(migration.statements);
      for (let k = stepsDone; k < steps.length; k++) {
        const step = steps[k] as Step;
        const record = journalRecord(s.schema, migration, k + 1 === steps.length ? null : k + 1);
        s.onProgress({ type: 'step', tag: migration.tag, step: k + 1, of: steps.length, kind: step.kind });
        if (step.kind === 'alone') {
          await buildAlone(db, migration.tag, step, s);
          await db.execute(record);
        } else {
          await withLockRetries(migration.tag, k + 1, s, () =>
            db.transaction(async (tx) => {
              await tx.execute(sql`select set_config('lock_timeout', ${`${s.lockTimeoutMs}ms`}, true)`);
              for (const statement of step.statements) await tx.execute(sql.raw(renderStatement(statement, s.schema)));
              await tx.execute(record);
            }),
          );
        }
      }
    }
    return pending.map((p) => p.migration.tag);
  } finally {
    await db.execute(sessionLockStatement(s.schema, false));
    await db.execute(sql.raw('reset statement_timeout'));
  }
}

/**
 * A concurrent index build, outside any transaction. An INVALID index of the same name is what an
 * interrupted build leaves (it is skipped by reads but slows every write): dropped and built again.
 * No lock_timeout: the build's lock lets enqueues and claims pass, and it waits for open
 * transactions on the table by design.
 */
async function buildAlone(db: AnyPgDatabase, tag: string, step: Step & { kind: 'alone' }, s: Settings) {
  if (step.index) {
    const [index] = await queryRows<{ valid: boolean }>(
      db,
      sql`select x.indisvalid as valid from pg_index x join pg_class i on i.oid = x.indexrelid
          where i.relname = ${step.index} and i.relnamespace = ${s.schema}::regnamespace`,
      s.schema,
    );
    if (index && !index.valid) {
      await db.execute(sql.raw(`drop index concurrently if exists "${s.schema}"."${step.index}"`));
      s.onProgress({ type: 'invalid_index_dropped', tag, index: step.index });
    }
  }
  await db.execute(sql.raw(renderStatement(step.statement, s.schema)));
}

/** neon-http: no session. Each step is one batch (one transaction) that takes the lock itself. */
async function migrateInBatches(db: NeonHttpDatabase, migrations: readonly Migration[], s: Settings) {
  const batch = (statements: SQL[]) =>
    db.batch([db.execute(lockStatement(s.schema)), ...statements.map((statement) => db.execute(statement))]);
  await batch(bootstrapStatements(s.schema));
  const journal = await readJournal(db, s.schema);
  refuseLegacyJournal(journal, s.schema);
  const pending = pendingMigrations(journal, migrations, s.schema);
  const applied: string[] = [];
  for (const { migration, stepsDone } of pending) {
    const steps = planSteps(migration.statements);
    for (let k = stepsDone; k < steps.length; k++) {
      const step = steps[k] as Step;
      if (step.kind === 'alone') throw new MigrationNeedsSessionError(migration.tag);
      s.onProgress({ type: 'step', tag: migration.tag, step: k + 1, of: steps.length, kind: step.kind });
      const statements = [
        sql`select set_config('lock_timeout', ${`${s.lockTimeoutMs}ms`}, true)`,
        sql`select set_config('statement_timeout', ${String(s.statementTimeoutMs)}, true)`,
        ...step.statements.map((statement) => sql.raw(renderStatement(statement, s.schema))),
        journalRecord(s.schema, migration, k + 1 === steps.length ? null : k + 1),
      ];
      try {
        await withLockRetries(migration.tag, k + 1, s, () => batch(statements));
      } catch (err) {
        // A concurrent migrator may have applied this step between our read and our batch (the
        // batch then fails on existing objects and rolls back whole): nothing left to do then.
        const still = pendingMigrations(await readJournal(db, s.schema), migrations, s.schema);
        const mine = still.find((p) => p.migration.tag === migration.tag);
        if (mine && mine.stepsDone <= k) throw err;
        return applied;
      }
    }
    applied.push(migration.tag);
  }
  return applied;
}

async function withLockRetries(tag: string, step: number, s: Settings, work: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await work();
      return;
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

function readJournal(db: AnyPgDatabase, schema: string): Promise<JournalEntry[]> {
  return queryRows<JournalEntry>(db, journalQuery(schema), schema);
}
