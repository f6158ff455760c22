import { batchInSequence, type Executor } from './executor.js';
import { renderSql } from './render.js';
import { observed } from './statement-listeners.js';

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
export function queryExecutor(run: QueryFunction): Executor {
  const query: Executor['query'] = async (statement) => {
    const { sql, params } = renderSql(statement);
    const result = await run(sql, params);
    return [...('rows' in result ? result.rows : result)];
  };
  // Already inside the caller's transaction (or on its single connection): none of its own to open.
  return observed({ query, hot: query, batch: batchInSequence(query), transaction: undefined }, undefined);
}
