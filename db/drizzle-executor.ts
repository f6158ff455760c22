import type { SQL } from 'drizzle-orm';
import type { AnyPgDatabase } from './connection-options.js';
import { batchInTransaction, type Executor } from './executor.js';

/** A Drizzle database that sends statements in one request, in one transaction: neon-http's. */
interface BatchingDatabase {
  batch(items: unknown[]): Promise<unknown[]>;
}

function isBatching(db: AnyPgDatabase): db is AnyPgDatabase & BatchingDatabase {
  return 'batch' in db && typeof db.batch === 'function';
}

/** The rows of what a Drizzle database's execute() returned (node-postgres, Neon: a result with `rows`). */
function rowsOf(result: unknown): unknown[] {
  return typeof result === 'object' && result !== null && 'rows' in result && Array.isArray(result.rows)
    ? result.rows
    : [];
}

/**
 * An Executor over a Drizzle database or transaction (node-postgres, neon-serverless, neon-http):
 * `hot` is `query`, a transaction is Drizzle's (a savepoint inside one), and a batch is neon-http's
 * own request where the database has no interactive transactions.
 */
export function drizzleExecutor(db: AnyPgDatabase): Executor {
  const query = async (statement: SQL) => rowsOf(await db.execute(statement));
  const hot = (statement: SQL) => query(statement);
  if (isBatching(db)) {
    return {
      query,
      hot,
      batch: async (statements) =>
        statements.length === 0 ? [] : (await db.batch(statements.map((s) => db.execute(s)))).map(rowsOf),
      transaction: undefined,
    };
  }
  const transaction: NonNullable<Executor['transaction']> = (work) => db.transaction((tx) => work(drizzleExecutor(tx)));
  return { query, hot, batch: batchInTransaction(transaction), transaction };
}
