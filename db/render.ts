import { type BuildQueryConfig, type QueryWithTypings, SQL } from 'drizzle-orm';
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

/**
 * A statement rendered already (db/statements/claim-cache.ts): Drizzle and the drivers take it as
 * any other statement and render nothing again. Never a part of another statement.
 */
export class RenderedSql extends SQL {
  readonly #text: string;
  readonly #params: unknown[];

  constructor(text: string, params: unknown[]) {
    super([]);
    this.#text = text;
    this.#params = params;
  }

  override toQuery(_config?: BuildQueryConfig): QueryWithTypings {
    return { sql: this.#text, params: this.#params };
  }
}
