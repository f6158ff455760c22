import { assertSchemaName } from '../base/identifiers.js';
import type { Executor } from './executor.js';
import { readJournalState } from './migration-journal.js';
import { MIGRATIONS } from './migrations.generated.js';
import { dumpSchema, expectedSchema, type SchemaDump, tablesOf } from './schema-dump.js';

/**
 * How a schema differs from this version's (db/schema.sql), object by object and, in a table, column
 * by column, with what each is and should be: what `skiplock migrate --check` prints, and what
 * migrate() compares before it records a schema made without its journal (the Drizzle path).
 */

export interface SchemaDrift {
  /** Objects db/schema.sql has and the database lacks: `kind name` (a column: `column table.name`). */
  missing: string[];
  /** Objects the database has and db/schema.sql does not (another version's, or added by hand). */
  unexpected: string[];
  /** Objects whose definitions differ; of a table on both sides, each column that differs. */
  changed: string[];
  /** What differs and how, one entry per object in missing, unexpected and changed, in their order. */
  details: DriftDetail[];
  invalidIndexes: string[];
  unvalidatedConstraints: string[];
  /**
   * Tables on both sides whose storage settings (fillfactor, per-table autovacuum) differ:
   * `storage <table>`. An operator's tuning (docs/performance.md), not drift: `hasDrift` ignores it.
   * A table missing on one side is drift of its own (`table <name>`).
   */
  tuned: string[];
}

export interface DriftDetail {
  /** The object as missing, unexpected or changed name it: `column jobs.priority`, `index jobs_claim_idx`. */
  object: string;
  /** The table a column, constraint, index or trigger belongs to. */
  table?: string;
  change: 'missing' | 'unexpected' | 'changed';
  /** The database's definition; of a function or view, its first line that differs. */
  actual?: string;
  /** db/schema.sql's. */
  expected?: string;
  /** For a function or view: the line of the definitions that differs first (from 1). */
  line?: number;
}

/** A table's storage settings: what an operator may tune without the schema drifting. */
const STORAGE = 'storage ';
const isStorage = (key: string) => key.startsWith(STORAGE);
const fold = (text: string) => text.replace(/\s+/g, ' ').trim();

/**
 * How a schema differs from what this version's migrations create (`expected`: db/schema.sql).
 * Definitions are compared with white space folded: the server's own formatting of a view may
 * differ between PostgreSQL versions in nothing else.
 */
export function schemaDrift(actual: SchemaDump, expected: Map<string, string>): SchemaDrift {
  const keys = [...new Set([...expected.keys(), ...actual.objects.keys()])];
  const differs = (key: string) => fold(actual.objects.get(key) ?? '') !== fold(expected.get(key) ?? '');
  const details: DriftDetail[] = [];
  for (const key of keys.filter((k) => !isStorage(k))) {
    const is = actual.objects.get(key);
    const should = expected.get(key);
    if (is === undefined && should !== undefined) details.push(objectDetail(key, 'missing', undefined, should));
    else if (is !== undefined && should === undefined) details.push(objectDetail(key, 'unexpected', is, undefined));
    else if (is !== undefined && should !== undefined && differs(key))
      details.push(
        ...(key.startsWith('table ') ? columnDetails(key, is, should) : [objectDetail(key, 'changed', is, should)]),
      );
  }
  const named = (change: DriftDetail['change']) => details.filter((d) => d.change === change).map((d) => d.object);
  return {
    missing: named('missing'),
    unexpected: named('unexpected'),
    changed: named('changed'),
    details,
    invalidIndexes: actual.invalidIndexes,
    unvalidatedConstraints: actual.unvalidatedConstraints,
    tuned: keys
      .filter((key) => {
        const table = `table ${key.slice(STORAGE.length)}`;
        return isStorage(key) && expected.has(table) && actual.objects.has(table) && differs(key);
      })
      .sort(),
  };
}

/** Objects whose definition fits on a line (columns, constraints, indexes, triggers) show it whole. */
const ONE_LINE = /^(constraint|index|trigger) /;

function objectDetail(
  key: string,
  change: DriftDetail['change'],
  actual: string | undefined,
  expected: string | undefined,
): DriftDetail {
  const detail: DriftDetail = { object: key, change };
  const table = tableOf(key, actual ?? expected ?? '');
  if (table) detail.table = table;
  if (ONE_LINE.test(key)) {
    if (actual !== undefined) detail.actual = shown(actual);
    if (expected !== undefined) detail.expected = shown(expected);
  } else if (change === 'changed' && actual !== undefined && expected !== undefined) {
    // A function or view: the first line that differs says where to look.
    const is = actual.split('\n').map(fold);
    const should = expected.split('\n').map(fold);
    let i = 0;
    while (i < Math.max(is.length, should.length) - 1 && is[i] === should[i]) i++;
    Object.assign(detail, { line: i + 1, actual: is[i] ?? '', expected: should[i] ?? '' });
  }
  return detail;
}

/** A one-line definition as --check shows it: of a constraint, what follows its name. */
function shown(definition: string): string {
  return fold(definition)
    .replace(/;$/, '')
    .replace(/^ALTER TABLE \S+ ADD CONSTRAINT ("(?:[^"]|"")*"|\S+) /, '');
}

/** A table on both sides: each column missing, unexpected or defined otherwise. */
function columnDetails(key: string, actual: string, expected: string): DriftDetail[] {
  const table = key.slice('table '.length);
  const is = columnsOf(actual);
  const should = columnsOf(expected);
  const details: DriftDetail[] = [];
  for (const name of new Set([...should.keys(), ...is.keys()])) {
    const object = `column ${table}.${name}`;
    const a = is.get(name);
    const e = should.get(name);
    if (a === undefined) details.push({ object, table, change: 'missing', expected: e });
    else if (e === undefined) details.push({ object, table, change: 'unexpected', actual: a });
    else if (fold(a) !== fold(e))
      details.push({ object, table, change: 'changed', actual: fold(a), expected: fold(e) });
  }
  // Columns alike, the text not (it should not happen): name the table, with its first differing line.
  return details.length > 0 ? details : [objectDetail(key, 'changed', actual, expected)];
}

/** A dumped CREATE TABLE's columns: name → the rest of its line (type, identity, default, NOT NULL). */
function columnsOf(definition: string): Map<string, string> {
  const columns = new Map<string, string>();
  for (const line of definition.split('\n').slice(1, -1)) {
    const match = /^("(?:[^"]|"")*"|\S+)\s+(.*?),?$/.exec(line.trim());
    if (match?.[1] && match[2] !== undefined)
      columns.set(match[1].replace(/^"|"$/g, '').replaceAll('""', '"'), match[2]);
  }
  return columns;
}

/** The table a constraint, column, index or trigger belongs to (undefined for tables, views, functions). */
function tableOf(key: string, definition: string): string | undefined {
  const [kind, name = ''] = key.split(' ');
  if (kind === 'constraint' || kind === 'column') return name.split('.')[0];
  if (kind === 'index' || kind === 'trigger') return /\bON (?:ONLY )?skiplock\.("?)([^\s"(]+)\1/.exec(definition)?.[2];
  return undefined;
}

/**
 * One difference as `migrate --check` prints it, e.g.
 * `changed: column priority of table jobs: is "smallint", expected "smallint DEFAULT 0 NOT NULL"`.
 */
export function describeDriftDetail(detail: DriftDetail): string {
  const space = detail.object.indexOf(' ');
  const kind = detail.object.slice(0, space);
  const name = detail.object.slice(space + 1);
  const table = detail.table;
  const own = table && name.startsWith(`${table}.`) ? name.slice(table.length + 1) : name;
  const what = table ? `${kind} ${own} ${kind === 'column' ? 'of' : 'on'} table ${table}` : detail.object;
  const { actual, expected, line } = detail;
  const how =
    actual !== undefined && expected !== undefined
      ? `: ${line ? `line ${line} ` : ''}is "${actual}", expected "${expected}"`
      : actual !== undefined
        ? `: is "${actual}"`
        : expected !== undefined
          ? `: expected "${expected}"`
          : '';
  return `${detail.change}: ${what}${how}`;
}

export function hasDrift(drift: SchemaDrift): boolean {
  return [drift.missing, drift.unexpected, drift.changed, drift.invalidIndexes, drift.unvalidatedConstraints].some(
    (list) => list.length > 0,
  );
}

export interface SchemaCheck extends SchemaDrift {
  /**
   * The schema holds skiplock's tables, but no journal of skiplock's migrations records any of them:
   * drizzle-kit (the Drizzle path) or a person made it. `skiplock migrate` records it once it matches.
   */
  unjournaled: boolean;
  /** This version's migrations the journal does not record as applied. */
  pending: string[];
}

/** How `schema` differs from db/schema.sql, and what its journal says (`skiplock migrate --check`). */
export async function checkSchema(db: Executor, schema: string): Promise<SchemaCheck> {
  const expected = expectedSchema();
  const [dump, journal] = await Promise.all([
    dumpSchema(db, schema),
    readJournalState(db, assertSchemaName(schema), tablesOf(expected)),
  ]);
  const entries = journal.entries ?? [];
  const applied = new Set(entries.filter((e) => e.steps_done === null).map((e) => e.tag));
  return {
    ...schemaDrift(dump, expected),
    unjournaled: entries.length === 0 && journal.holdsTables,
    pending: MIGRATIONS.filter((m) => !applied.has(m.tag)).map((m) => m.tag),
  };
}
