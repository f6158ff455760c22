import type { SQL } from 'drizzle-orm';

/**
 * `cheap`: its plan's estimated cost stays far below jit_above_cost whatever the backlog (the plain
 * claim walks an index under LIMIT, ~160 with 200,000 ready jobs; a settle finds its rows by id), so
 * no driver needs to keep it from being JIT-compiled. The keyed, limited and rated claims are not:
 * their walk over keys grows with the backlog.
 */
export interface HotStatementHint {
  cheap: boolean;
}

/**
 * What skiplock's statements run on — a pool, one connection or a transaction — as River's
 * `riverdriver.Executor` is: each driver builds its own (db/drivers/), whatever a caller passes (a
 * Drizzle database or transaction, a queryExecutor) becomes one through executorOf
 * (db/executor-of.ts), and db/statements/ sees nothing else. Rows come back as objects keyed by
 * column name, with timestamps as the text Postgres sent.
 */
export interface Executor {
  /** Runs one statement and returns its rows. */
  query(statement: SQL): Promise<unknown[]>;
  /**
   * Runs a hot statement (the claim, the settle) the driver's own way, else as `query` does: pg, as a
   * named prepared statement in a transaction of its own (db/drivers/pg-pool.ts); neon-http, behind
   * `SET LOCAL jit = off` in the same request unless it is `cheap` (db/drivers/neon-http.ts).
   */
  hot(statement: SQL, hint: HotStatementHint): Promise<unknown[]>;
  /**
   * Runs `statements` in order in one transaction, none reading another's rows, and returns each
   * one's rows: a transaction of its own where one can be opened, one request on neon-http, the
   * caller's own transaction through a queryExecutor.
   */
  batch(statements: readonly SQL[]): Promise<unknown[][]>;
  /**
   * Runs `work` in a transaction of its own (a savepoint inside a Drizzle transaction): committed
   * when `work` resolves, rolled back when it throws. Undefined where none can be opened: neon-http
   * has no interactive transactions, and a queryExecutor is already in the caller's.
   */
  readonly transaction: (<T>(work: (tx: Executor) => Promise<T>) => Promise<T>) | undefined;
}

/** `batch` for an executor that opens transactions: the statements one after another in one of them. */
export function batchInTransaction(transaction: NonNullable<Executor['transaction']>): Executor['batch'] {
  return (statements) => transaction((tx) => batchInSequence(tx.query)(statements));
}

/** `batch` where the statements already share a transaction: one after another. */
export function batchInSequence(query: Executor['query']): Executor['batch'] {
  return async (statements) => {
    const results: unknown[][] = [];
    for (const statement of statements) results.push(await query(statement));
    return results;
  };
}
