import type { SQL } from 'drizzle-orm';
import type { Driver } from './drivers/names.js';
import { batchInTransaction, type Executor } from './executor.js';
import { renderSql } from './render.js';

/**
 * Hears each statement an Executor sends, as its SQL text, with the driver of the connection it came
 * from (undefined for an executor made of a caller's Drizzle database or client).
 */
export type StatementListener = (text: string, driver: Driver | undefined) => void;

const listeners = new Set<StatementListener>();

/**
 * Tells `listener` of every statement sent from now on, until the returned function is called: the
 * seam the tests and the bench count statements at (test/helpers/statements.ts), for every driver.
 */
export function listenToStatements(listener: StatementListener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/**
 * `executor`, telling the listeners of each statement as it sends it: one per `query` or `hot` (a hot
 * statement's own transaction or JIT setting is not counted: it travels with it), each of a `batch`,
 * and a transaction's BEGIN and COMMIT (or ROLLBACK). With no listener, the cost is a size check.
 */
export function observed(executor: Executor, driver: Driver | undefined): Executor {
  const tell = (text: string) => {
    for (const listener of listeners) listener(text, driver);
  };
  const told = (statement: SQL) => {
    if (listeners.size > 0) tell(renderSql(statement).sql);
  };
  const inner = executor.transaction;
  const transaction: Executor['transaction'] = inner
    ? async (work) => {
        tell('begin');
        try {
          const result = await inner((tx) => work(observed(tx, driver)));
          tell('commit');
          return result;
        } catch (err) {
          tell('rollback');
          throw err;
        }
      }
    : undefined;
  return {
    query: (statement) => {
      told(statement);
      return executor.query(statement);
    },
    hot: (statement, hint) => {
      told(statement);
      return executor.hot(statement, hint);
    },
    batch: transaction
      ? batchInTransaction(transaction)
      : (statements) => {
          for (const statement of statements) told(statement);
          return executor.batch(statements);
        },
    transaction,
  };
}
