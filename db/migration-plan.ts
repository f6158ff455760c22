/**
 * How a migration is applied without stopping the queue, and the rules a migration must follow
 * for that to hold. Pure functions: no database here (db/migrate.ts runs the plan).
 *
 * A migration is split into steps, each committed on its own:
 * - `transaction`: ordinary DDL, run in one transaction under `lock_timeout`, so a migration that
 *   waits for a lock on `jobs` (behind a long read) gives up and retries instead of making every
 *   enqueue and claim queue behind it;
 * - `alone`: `CREATE INDEX CONCURRENTLY` (and its DROP), which cannot run in a transaction. It takes
 *   a lock that enqueues and claims pass (SHARE UPDATE EXCLUSIVE), so it may wait as long as it needs;
 * - `VALIDATE CONSTRAINT` in a transaction of its own, after the `NOT VALID` that added it
 *   committed: its scan then holds no lock that blocks writes.
 * The journal records the steps done, so an interrupted migration resumes where it stopped.
 */

export interface Migration {
  /** The migration's name; identifies it in the journal. */
  tag: string;
  /** sha256 of the migration file: an applied migration whose file changed since is refused. */
  hash: string;
  statements: string[];
  /**
   * Index of the first statement drizzle-kit cannot generate from db/schema.ts (functions, views,
   * triggers, storage settings): the part the Drizzle path applies as a custom migration.
   */
  objectsFrom: number;
}

export type Step =
  | { kind: 'transaction'; statements: string[] }
  | { kind: 'alone'; statement: string; index: string | undefined };

/** Marks the start of the hand-written part of a migration file. */
export const OBJECTS_MARKER = '-- skiplock:objects';

/** Marks a statement that removes something the previous release still used: never in a release's expand. */
export const CONTRACT_MARKER = '-- skiplock:contract';

const CONCURRENTLY = /\bCONCURRENTLY\b/i;
const VALIDATE = /\bVALIDATE\s+CONSTRAINT\b/i;

/** The steps of a migration, in order. */
export function planSteps(statements: readonly string[]): Step[] {
  const steps: Step[] = [];
  let open: string[] | undefined;
  for (const statement of statements) {
    if (CONCURRENTLY.test(codeOf(statement))) {
      open = undefined;
      steps.push({ kind: 'alone', statement, index: concurrentIndexName(statement) });
    } else if (VALIDATE.test(codeOf(statement))) {
      open = undefined;
      steps.push({ kind: 'transaction', statements: [statement] });
    } else if (open) {
      open.push(statement);
    } else {
      open = [statement];
      steps.push({ kind: 'transaction', statements: open });
    }
  }
  return steps;
}

/** The name a `CREATE INDEX CONCURRENTLY` builds (to find an INVALID leftover of an interrupted build). */
export function concurrentIndexName(statement: string): string | undefined {
  const match = /CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(?:IF\s+NOT\s+EXISTS\s+)?"?([a-z_][a-z0-9_]*)"?/i.exec(
    codeOf(statement),
  );
  return match?.[1];
}

/** The migration's SQL for `schema`: migrations are written against "skiplock". */
export function renderStatement(statement: string, schema: string): string {
  return statement
    .replace(/CREATE SCHEMA "skiplock"/g, 'CREATE SCHEMA IF NOT EXISTS "skiplock"')
    .replace(/"skiplock"/g, `"${schema}"`);
}

/**
 * The SQL of `migrations` for `schema`, as migrate applies it: each migration under a header, its
 * statements separated by drizzle's breakpoints. `objectsOnly`: only the part drizzle-kit cannot
 * generate, for the Drizzle path's custom migration.
 */
export function migrationSql(
  migrations: readonly Migration[],
  schema: string,
  { objectsOnly }: { objectsOnly: boolean },
): string {
  return migrations
    .map((m) => {
      const statements = objectsOnly ? m.statements.slice(m.objectsFrom) : m.statements;
      const body = statements
        .map((statement) => renderStatement(statement, schema))
        .join('\n--> statement-breakpoint\n');
      return `-- skiplock migration ${m.tag}${objectsOnly ? ' (objects)' : ''}, schema "${schema}"\n${body}\n`;
    })
    .join('\n');
}

/** The statement without its comments (a comment may mention CONCURRENTLY). */
function codeOf(statement: string): string {
  return statement
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n');
}

export interface LintFinding {
  tag: string;
  statement: number;
  rule: string;
  message: string;
}

/**
 * Statements that would block enqueues and claims on a table that already holds rows, or that
 * would break the previous release's code on the new schema. A table the same migration creates
 * is empty: anything goes on it. Run over every migration by a test, so CI fails on a blocking form.
 */
export function lintMigration(migration: Pick<Migration, 'tag' | 'statements'>): LintFinding[] {
  const findings: LintFinding[] = [];
  const created = new Set<string>();
  migration.statements.forEach((statement, i) => {
    const code = codeOf(statement).replace(/\s+/g, ' ').trim();
    const add = (rule: string, message: string) =>
      findings.push({ tag: migration.tag, statement: i + 1, rule, message });
    const newTable = /^CREATE TABLE (?:IF NOT EXISTS )?"skiplock"\."(\w+)"/i.exec(code);
    if (newTable?.[1]) created.add(newTable[1]);
    const target = tableOf(code);
    const existing = target !== undefined && !created.has(target);
    const contract = statement.includes(CONTRACT_MARKER);

    if (existing && /^CREATE (UNIQUE )?INDEX (?!CONCURRENTLY)/i.test(code))
      add(
        'index-concurrently',
        `builds an index on "${target}" under a lock that blocks writes: use CREATE INDEX CONCURRENTLY IF NOT EXISTS`,
      );
    if (/^CREATE (UNIQUE )?INDEX CONCURRENTLY (?!IF NOT EXISTS)/i.test(code))
      add('index-if-not-exists', 'a concurrent build must say IF NOT EXISTS, so an interrupted migration can resume');
    if (/^DROP INDEX (?!CONCURRENTLY)/i.test(code))
      add(
        'drop-index-concurrently',
        'drops an index under a lock that blocks reads and writes: use DROP INDEX CONCURRENTLY IF EXISTS',
      );
    if (existing && /ADD CONSTRAINT .* (CHECK|FOREIGN KEY)/i.test(code) && !/NOT VALID/i.test(code))
      add(
        'constraint-not-valid',
        `scans "${target}" under an exclusive lock: add the constraint NOT VALID, then VALIDATE CONSTRAINT in its own statement`,
      );
    if (existing && /ALTER COLUMN \S+ (SET DATA )?TYPE/i.test(code))
      add('no-rewrite', `rewrites "${target}" under an exclusive lock: add a new column instead`);
    if (existing && /ALTER COLUMN \S+ SET NOT NULL/i.test(code))
      add(
        'no-set-not-null',
        `scans "${target}" under an exclusive lock: add a CHECK (col IS NOT NULL) NOT VALID and validate it`,
      );
    if (existing && /ADD COLUMN .* DEFAULT .*\b(now|clock_timestamp|random|gen_random_uuid|nextval)\s*\(/i.test(code))
      add(
        'no-volatile-default',
        `a volatile default rewrites "${target}": add the column without it, then set the default`,
      );
    if (/^(VACUUM FULL|CLUSTER|REINDEX (?!.*CONCURRENTLY))/i.test(code))
      add('no-rewrite', 'rewrites a table or index under an exclusive lock');
    if (existing && !contract && /(DROP COLUMN|RENAME (COLUMN |TO ))/i.test(code))
      add(
        'expand-only',
        `removes or renames what the previous release's code reads: mark it ${CONTRACT_MARKER} in a later release`,
      );
    const dropped = /^DROP (TABLE|VIEW|FUNCTION) (?:IF EXISTS )?"skiplock"\."?(\w+)/i.exec(code);
    if (!contract && dropped && !recreatedLater(migration.statements.slice(i + 1), dropped[2] ?? ''))
      add(
        'expand-only',
        `removes what the previous release's code may use: mark it ${CONTRACT_MARKER} in a later release`,
      );
  });
  return findings;
}

/** Whether a later statement creates the object again (a view or function replaced in one transaction). */
function recreatedLater(statements: readonly string[], name: string): boolean {
  const again = new RegExp(`CREATE (OR REPLACE )?(VIEW|FUNCTION) "skiplock"\\."?${name}\\b`, 'i');
  return statements.some((s) => again.test(codeOf(s)));
}

/** The skiplock table a statement works on, if any. */
function tableOf(code: string): string | undefined {
  const match =
    /^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?"skiplock"\."(\w+)"/i.exec(code) ??
    /^CREATE (?:UNIQUE )?INDEX .*? ON (?:ONLY )?"skiplock"\."(\w+)"/i.exec(code);
  return match?.[1];
}
