import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { NodePgSession, NodePgTransaction } from 'drizzle-orm/node-postgres/session';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { drizzleExecutor } from '../drizzle-executor.js';
import { observed } from '../statement-listeners.js';
import { namedRunner, openPgPool } from './pg-pool.js';
import { safeTransactions } from './session.js';

/** node-postgres Pool under a Drizzle database: any Postgres, PgBouncer in transaction mode. */
export function pgDatabase(settings: PoolSettings): SkiplockDb {
  const pool = openPgPool(settings);
  const db = drizzle({ client: pool });
  safeTransactions(db, pool, { session: NodePgSession, transaction: NodePgTransaction, sql } as never);
  const executor = drizzleExecutor(db);
  return {
    driver: 'pg',
    db,
    executor: observed(settings.preparedStatements ? { ...executor, hot: namedRunner(pool) } : executor, 'pg'),
    interactiveTransactions: true,
    close: () => pool.end(),
  };
}
