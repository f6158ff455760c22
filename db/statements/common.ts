import { type SQL, sql } from 'drizzle-orm';

/** `"schema"."jobs"` for an already validated schema name. */
export function jobsRef(schema: string): SQL {
  return sql`${sql.identifier(schema)}.jobs`;
}

/**
 * The statement's notion of "now": the database clock, read with clock_timestamp() so a
 * long caller transaction does not freeze it. Tests pass `now` to move time without sleeping.
 */
export function nowExpr(now: Date | undefined): SQL {
  return now ? sql`${now.toISOString()}::timestamptz` : sql`clock_timestamp()`;
}

/** Timestamps leave the database as epoch milliseconds: one format for every driver. */
export function epochMs(column: SQL): SQL {
  return sql`(extract(epoch from ${column}) * 1000)::float8`;
}

/** Appends `entry` to a jsonb array, keeping the newest `ERROR_HISTORY` entries. */
export const ERROR_HISTORY = 10;
export function appendCapped(history: SQL, entry: SQL): SQL {
  return sql`jsonb_path_query_array(${history} || jsonb_build_array(${entry}), ${sql.raw(`'$[last-${ERROR_HISTORY - 1} to last]'`)})`;
}

export function toDate(ms: number | null | undefined): Date | null {
  return ms === null || ms === undefined ? null : new Date(ms);
}
