import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { NodePgSession, NodePgTransaction } from 'drizzle-orm/node-postgres/session';
import pg from 'pg';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { jitOff, safeTransactions } from './session.js';

/** node-postgres Pool: any Postgres, PgBouncer in transaction mode. */
export function pgDatabase(settings: PoolSettings): SkiplockDb {
  const { neon: _neon, jit, ...poolSettings } = settings;
  const pool = new pg.Pool({ ...poolSettings, ...(jit ? {} : { onConnect: jitOff }) });
  // An idle client's error (server restart, network drop) must not crash the process, nor one a
  // transaction holds checked out: its next statement fails instead (the chaos harness found it).
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = drizzle({ client: pool });
  safeTransactions(db, pool, { session: NodePgSession, transaction: NodePgTransaction, sql } as never);
  return {
    driver: 'pg',
    db,
    interactiveTransactions: true,
    close: () => pool.end(),
  };
}
