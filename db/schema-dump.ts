import { sql } from 'drizzle-orm';
import { assertSchemaName } from '../base/identifiers.js';
import { queryRows } from './execute.js';
import type { Executor } from './executor.js';
import { SCHEMA_SQL } from './schema-sql.generated.js';

/**
 * A normalised, readable dump of one skiplock schema, read from the catalogs: what
 * `pg_dump --schema-only` would show, in an order and spelling that do not depend on the
 * migration history (columns and objects sorted by name, the schema always "skiplock").
 *
 * It is read with SQL rather than by running pg_dump so that it works over every driver
 * (neon-http has no pg_dump beside it), inside `skiplock migrate --check` on a deployed
 * function, and with no client binary whose version must match the server's.
 * `db/schema.sql` is this dump for a freshly migrated schema; a test fails on drift.
 */
export interface SchemaDump {
  /** The whole dump as SQL text. */
  text: string;
  /** One entry per object: `kind name` → its definition. */
  objects: Map<string, string>;
  /** Indexes a failed or interrupted CREATE INDEX CONCURRENTLY left INVALID. */
  invalidIndexes: string[];
  /** CHECK or foreign-key constraints added NOT VALID and not validated since. */
  unvalidatedConstraints: string[];
}

/** Starts each object's section in the dump (function bodies may hold `-- ` comments of their own). */
const OBJECT_HEADER = '-- object: ';

/** The objects of a dump's text (db/schema.sql), by the same keys as SchemaDump.objects. */
export function parseSchemaDump(text: string): Map<string, string> {
  const objects = new Map<string, string>();
  const sections = text.split(`\n${OBJECT_HEADER}`).slice(1);
  for (const section of sections) {
    const newline = section.indexOf('\n');
    objects.set(section.slice(0, newline), section.slice(newline + 1).trim());
  }
  return objects;
}

/** db/schema.sql's objects (this version's schema), parsed once. */
let expectedObjects: Map<string, string> | undefined;
export function expectedSchema(): Map<string, string> {
  expectedObjects ??= parseSchemaDump(SCHEMA_SQL);
  return expectedObjects;
}

/** The tables of a parsed dump. */
export function tablesOf(objects: Map<string, string>): string[] {
  return [...objects.keys()].filter((key) => key.startsWith('table ')).map((key) => key.slice('table '.length));
}

/**
 * db/schema.sql's definition of an index as a concurrent build in `schema`: how migrate() builds
 * again an index of this version's schema that an interrupted build left INVALID.
 */
export function concurrentIndexBuild(definition: string, schema: string): string {
  return definition
    .replace(/^CREATE (UNIQUE )?INDEX (\S+) ON /, 'CREATE $1INDEX CONCURRENTLY IF NOT EXISTS $2 ON ')
    .replace(/(?<![\w"])skiplock\./g, `"${schema}".`);
}

/** The migrator's own bookkeeping: not part of the schema a user (or the Drizzle path) owns. */
const BOOKKEEPING = new Set(['skiplock_migrations']);

interface ColumnRow {
  table_name: string;
  column_name: string;
  type: string;
  not_null: boolean;
  default_expr: string | null;
  identity: string;
}

export async function dumpSchema(db: Executor, schemaName: string): Promise<SchemaDump> {
  const schema = assertSchemaName(schemaName);
  const [tables, columns, constraints, indexes, views, functions, triggers] = await Promise.all([
    queryRows<{ name: string; options: string[] | null }>(
      db,
      sql`select c.relname as name, c.reloptions as options from pg_class c
          where c.relnamespace = ${schema}::regnamespace and c.relkind = 'r' order by c.relname`,
      schema,
    ),
    queryRows<ColumnRow>(
      db,
      sql`select c.relname as table_name, a.attname as column_name,
            format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
            pg_get_expr(d.adbin, d.adrelid) as default_expr, a.attidentity::text as identity
          from pg_attribute a
          join pg_class c on c.oid = a.attrelid
          left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
          where c.relnamespace = ${schema}::regnamespace and c.relkind = 'r'
            and a.attnum > 0 and not a.attisdropped
          order by c.relname, a.attname`,
      schema,
    ),
    queryRows<{ table_name: string; name: string; definition: string; validated: boolean }>(
      db,
      sql`select c.relname as table_name, k.conname as name, pg_get_constraintdef(k.oid) as definition,
            k.convalidated as validated
          from pg_constraint k join pg_class c on c.oid = k.conrelid
          where c.relnamespace = ${schema}::regnamespace
          order by c.relname, k.conname`,
      schema,
    ),
    queryRows<{ name: string; definition: string; valid: boolean }>(
      db,
      sql`select i.relname as name, pg_get_indexdef(x.indexrelid) as definition, x.indisvalid as valid
          from pg_index x join pg_class i on i.oid = x.indexrelid
          where i.relnamespace = ${schema}::regnamespace
            and not exists (select 1 from pg_constraint k where k.conindid = x.indexrelid and k.contype in ('p', 'u'))
          order by i.relname`,
      schema,
    ),
    queryRows<{ name: string; definition: string }>(
      db,
      sql`select c.relname as name, pg_get_viewdef(c.oid) as definition from pg_class c
          where c.relnamespace = ${schema}::regnamespace and c.relkind = 'v' order by c.relname`,
      schema,
    ),
    queryRows<{ name: string; args: string; definition: string }>(
      db,
      sql`select p.proname as name, pg_get_function_identity_arguments(p.oid) as args,
            pg_get_functiondef(p.oid) as definition
          from pg_proc p where p.pronamespace = ${schema}::regnamespace
          order by p.proname, 2`,
      schema,
    ),
    queryRows<{ name: string; definition: string }>(
      db,
      sql`select t.tgname as name, pg_get_triggerdef(t.oid) as definition
          from pg_trigger t join pg_class c on c.oid = t.tgrelid
          where c.relnamespace = ${schema}::regnamespace and not t.tgisinternal
          order by t.tgname`,
      schema,
    ),
  ]);

  const names = [...tables.map((t) => t.name), ...views.map((v) => v.name), ...functions.map((f) => f.name)];
  const normalise = schemaNormaliser(schema, names);
  const objects = new Map<string, string>();
  const add = (key: string, definition: string) => objects.set(key, normalise(definition).trim());

  for (const table of tables) {
    if (BOOKKEEPING.has(table.name)) continue;
    const lines = columns.filter((c) => c.table_name === table.name).map(columnLine);
    add(`table ${table.name}`, `CREATE TABLE skiplock.${ident(table.name)} (\n${lines.join(',\n')}\n);`);
    if (table.options?.length)
      add(
        `storage ${table.name}`,
        `ALTER TABLE skiplock.${ident(table.name)} SET (${[...table.options].sort().join(', ')});`,
      );
  }
  for (const c of constraints) {
    if (BOOKKEEPING.has(c.table_name)) continue;
    add(
      `constraint ${c.table_name}.${c.name}`,
      `ALTER TABLE skiplock.${ident(c.table_name)} ADD CONSTRAINT ${ident(c.name)} ${c.definition};`,
    );
  }
  for (const i of indexes) add(`index ${i.name}`, `${i.definition};`);
  for (const v of views) add(`view ${v.name}`, `CREATE VIEW skiplock.${ident(v.name)} AS\n${v.definition.trim()}`);
  for (const f of functions) add(`function ${f.name}(${f.args})`, `${f.definition.trim()};`);
  for (const t of triggers) add(`trigger ${t.name}`, `${t.definition};`);

  const sections = [...objects].map(([key, definition]) => `${OBJECT_HEADER}${key}\n${definition}`);
  return {
    text: `${sections.join('\n\n')}\n`,
    objects,
    invalidIndexes: indexes.filter((i) => !i.valid).map((i) => i.name),
    unvalidatedConstraints: constraints.filter((c) => !c.validated).map((c) => c.name),
  };
}

function columnLine(c: ColumnRow): string {
  const parts = [`  ${ident(c.column_name)} ${c.type}`];
  if (c.identity === 'd') parts.push('GENERATED BY DEFAULT AS IDENTITY');
  else if (c.identity === 'a') parts.push('GENERATED ALWAYS AS IDENTITY');
  if (c.default_expr !== null) parts.push(`DEFAULT ${c.default_expr}`);
  if (c.not_null) parts.push('NOT NULL');
  return parts.join(' ');
}

/** Quotes an identifier the way pg_dump does: only when it needs it. */
function ident(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/**
 * Spells the schema skiplock wherever it qualifies one of its own objects (the catalogs
 * print the real name, and function bodies hold what the migrator rendered). Only
 * `schema.object` is replaced, so a schema named like one of its tables stays unambiguous.
 */
function schemaNormaliser(schema: string, objectNames: readonly string[]): (text: string) => string {
  const objects = [...new Set(objectNames)].map((n) => n.replace(/[^a-z0-9_]/g, '')).join('|');
  const qualified = new RegExp(`(?<![\\w"])"?${schema}"?\\.("?)(${objects})\\b`, 'g');
  const bare = new RegExp(`(?<![\\w"])"${schema}"(?![\\w"])`, 'g');
  return (text) => text.replace(qualified, 'skiplock.$1$2').replace(bare, '"skiplock"');
}
