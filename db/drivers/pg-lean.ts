import type pg from 'pg';
import type { PoolSettings, SkiplockConnection } from '../connection-options.js';
import { batchInSequence, batchInTransaction, type Executor } from '../executor.js';
import { renderSql } from '../render.js';
import { observed } from '../statement-listeners.js';
import { namedRunner, openPgPool, PG_TYPES, withClient } from './pg-pool.js';

/**
 * node-postgres without a Drizzle database: what the deployed functions connect with on pg. Every
 * statement skiplock sends is an `sql` fragment; rendering one takes Drizzle's SQL class alone,
 * while a Drizzle database brings its query builders, columns and relations (~84 KB of the worker's
 * bundle). Handlers that need a Drizzle transaction (transactional kinds and steps) get one from
 * the worker's `drizzle` option, over one of this pool's connections (`drizzleTransaction`).
 */
export function pgLeanDatabase(settings: PoolSettings): SkiplockConnection {
  const pool = openPgPool(settings);
  const query = queryOn(pool);
  const transaction = transactionOn(pool);
  const executor: Executor = {
    query,
    hot: settings.preparedStatements ? namedRunner(pool) : query,
    batch: batchInTransaction(transaction),
    transaction,
  };
  return {
    driver: 'pg',
    executor: observed(executor, 'pg'),
    interactiveTransactions: true,
    drizzleTransaction: (drizzle, work) => withClient(pool, (client) => drizzle({ client }).transaction(work)),
    close: () => pool.end(),
  };
}

type Queryable = { query(config: pg.QueryConfig): Promise<pg.QueryResult> };

/** Statements on a pool or one connection, with rows as Drizzle's node-postgres session gives them: timestamps as text. */
function queryOn(target: Queryable): Executor['query'] {
  return async (statement) => {
    const { sql: text, params: values } = renderSql(statement);
    return (await target.query({ text, values, types: PG_TYPES })).rows;
  };
}

/** BEGIN … COMMIT on one connection of the pool; ROLLBACK when `work` throws (withClient). */
function transactionOn(pool: pg.Pool): NonNullable<Executor['transaction']> {
  return (work) =>
    withClient(pool, async (client) => {
      await client.query('begin');
      const query = queryOn(client);
      // Inside it, statements run one after another; a transaction does not nest here.
      const result = await work({ query, hot: query, batch: batchInSequence(query), transaction: undefined });
      await client.query('commit');
      return result;
    });
}
