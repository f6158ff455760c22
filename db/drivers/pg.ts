import { type SQL, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { NodePgSession, NodePgTransaction } from 'drizzle-orm/node-postgres/session';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { registerNamedRunner } from '../execute.js';
import { namedRunner, openPgPool } from './pg-pool.js';
import { safeTransactions } from './session.js';

/** node-postgres Pool under a Drizzle database: any Postgres, PgBouncer in transaction mode. */
export function pgDatabase(settings: PoolSettings): SkiplockDb {
  const pool = openPgPool(settings);
  const db = drizzle({ client: pool });
  safeTransactions(db, pool, { session: NodePgSession, transaction: NodePgTransaction, sql } as never);
  if (settings.preparedStatements) {
    const dialect = (db as unknown as { dialect: { sqlToQuery(query: SQL): { sql: string; params: unknown[] } } })
      .dialect;
    registerNamedRunner(
      db,
      namedRunner((query) => dialect.sqlToQuery(query), pool),
    );
  }
  return {
    driver: 'pg',
    db,
    interactiveTransactions: true,
    close: () => pool.end(),
  };
}
