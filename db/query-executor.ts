import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { AnyPgDatabase } from './connection-options.js';

/**
 * Runs one statement of skiplock's, given as SQL text with `$1…` parameters, on the caller's
 * connection or transaction, and returns its rows as objects keyed by column name.
 */
export type QueryFunction = (
  text: string,
  params: unknown[],
) => Promise<{ rows: readonly unknown[] } | readonly unknown[]>;

/**
 * The seam for enqueueing (and signalling) through any Postgres client: skiplock renders each of its
 * statements to text and parameters and hands them to `run`, on the caller's own connection — so
 * inside the caller's transaction when `run` uses one (a pg `PoolClient` after BEGIN, a postgres.js
 * `sql.begin` transaction, a Kysely transaction, a Prisma interactive transaction). The statements
 * a send of signals needs run one after another through `run`, in that same transaction.
 */
export function queryExecutor(run: QueryFunction): AnyPgDatabase {
  const dialect = new PgDialect();
  const execute = async (query: SQL) => {
    const { sql, params } = dialect.sqlToQuery(query);
    const result = await run(sql, params);
    return { rows: Array.isArray(result) ? result : (result as { rows: readonly unknown[] }).rows };
  };
  const executor = {
    execute,
    // Already inside the caller's transaction (or its single connection): run the work there.
    transaction: <T>(work: (tx: unknown) => Promise<T>) => work(executor),
  };
  return executor as unknown as AnyPgDatabase;
}
