import type { SQL } from 'drizzle-orm';
import { CasingCache } from 'drizzle-orm/casing';

/**
 * The rendering settings of Drizzle's Postgres dialect (PgDialect.sqlToQuery), without a dialect:
 * what a statement becomes on pg, neon-ws and neon-http, from the SQL class alone.
 */
const RENDERING = {
  casing: new CasingCache(),
  escapeName: (name: string) => `"${name.replace(/"/g, '""')}"`,
  escapeParam: (n: number) => `$${n + 1}`,
  escapeString: (text: string) => `'${text.replace(/'/g, "''")}'`,
};

/** A statement as the text and parameters Postgres receives. */
export function renderSql(statement: SQL): { sql: string; params: unknown[] } {
  return statement.toQuery(RENDERING);
}
