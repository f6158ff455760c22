import { neonConfig, Pool } from '@neondatabase/serverless';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/neon-serverless';
import { NeonSession, NeonTransaction } from 'drizzle-orm/neon-serverless/session';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { drizzleExecutor } from '../drizzle-executor.js';
import { observed } from '../statement-listeners.js';
import { applyNeonOptions } from './neon-config.js';
import { jitOff, safeTransactions } from './session.js';

/**
 * Neon's WebSocket Pool: interactive transactions over WebSockets (Neon, or a wsproxy).
 * Node 22+ has a global WebSocket; on Node 20 pass the `ws` package's constructor.
 */
export function neonWsDatabase(settings: PoolSettings, webSocket?: unknown): SkiplockDb {
  applyNeonOptions(settings.neon);
  if (!neonConfig.webSocketConstructor && typeof globalThis.WebSocket === 'undefined' && webSocket) {
    Object.assign(neonConfig, { webSocketConstructor: webSocket });
  }
  // Named statements are pg's alone (ConnectOptions.preparedStatements).
  const { neon: _neon, jit, preparedStatements: _prepared, ...poolSettings } = settings;
  const pool = new Pool({ ...poolSettings, ...(jit ? {} : { onConnect: jitOff }) });
  // As pgDatabase: an error on an idle or checked-out client fails its statements, not the process.
  pool.on('error', () => {});
  pool.on('connect', (client: { on(event: 'error', listener: () => void): unknown }) => client.on('error', () => {}));
  const db = drizzle({ client: pool });
  safeTransactions(db, pool, { session: NeonSession, transaction: NeonTransaction, sql } as never);
  return {
    driver: 'neon-ws',
    db,
    executor: observed(drizzleExecutor(db), 'neon-ws'),
    interactiveTransactions: true,
    close: () => pool.end(),
  };
}
