import type { SQL } from 'drizzle-orm';
import { CasingCache } from 'drizzle-orm/casing';
import type pg from 'pg';
import type { AnyPgDatabase, PoolSettings, SkiplockDb } from '../connection-options.js';
import { registerNamedRunner } from '../execute.js';
import { namedRunner, openPgPool, PG_TYPES, withClient } from './pg-pool.js';

/**
 * node-postgres without a Drizzle database: what the deployed functions connect with on pg. Every
 * statement skiplock sends is an `sql` fragment; rendering one takes Drizzle's SQL class alone,
 * while a Drizzle database brings its query builders, columns and relations (~84 KB of the worker's
 * bundle). Handlers that need a Drizzle transaction (transactional kinds and steps) get one from
 * the worker's `drizzle` option, over one of this pool's connections (`drizzleTransaction`).
 */
export function pgLeanDatabase(settings: PoolSettings): SkiplockDb {
  const pool = openPgPool(settings);
  const db = new LeanExecutor(pool, pool);
  if (settings.preparedStatements) registerNamedRunner(db, namedRunner(render, pool));
  return {
    driver: 'pg',
    db: db as unknown as AnyPgDatabase,
    interactiveTransactions: true,
    drizzleTransaction: (drizzle, work) => withClient(pool, (client) => drizzle({ client }).transaction(work)),
    close: () => pool.end(),
  };
}

/** The rendering settings of Drizzle's Postgres dialect. */
const RENDERING = {
  casing: new CasingCache(),
  escapeName: (name: string) => `"${name.replace(/"/g, '""')}"`,
  escapeParam: (n: number) => `$${n + 1}`,
  escapeString: (text: string) => `'${text.replace(/'/g, "''")}'`,
};
const render = (query: SQL) => query.toQuery(RENDERING);

type Queryable = { query(config: pg.QueryConfig): Promise<pg.QueryResult> };

/** What skiplock's statements call on a database: execute(sql), and transaction() for its own writes. */
class LeanExecutor {
  readonly #target: Queryable;
  readonly #pool: pg.Pool | undefined;

  /** `pool`: the pool transactions take a connection from; none inside a transaction. */
  constructor(target: Queryable, pool: pg.Pool | undefined) {
    this.#target = target;
    this.#pool = pool;
  }

  /** The statement's result as Drizzle's node-postgres session gives it: rows as objects, timestamps as text. */
  execute(query: SQL): Promise<pg.QueryResult> {
    const { sql: text, params: values } = render(query);
    return this.#target.query({ text, values, types: PG_TYPES });
  }

  /** BEGIN … COMMIT on one connection; ROLLBACK when `work` throws. Not nested. */
  async transaction<T>(work: (tx: LeanExecutor) => Promise<T>): Promise<T> {
    if (!this.#pool) throw new Error('nested transactions are not supported here');
    return withClient(this.#pool, async (client) => {
      await client.query('begin');
      const result = await work(new LeanExecutor(client, undefined));
      await client.query('commit');
      return result;
    });
  }
}
