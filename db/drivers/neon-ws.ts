import { neonConfig, Pool } from '@neondatabase/serverless';
import { drizzle } from 'drizzle-orm/neon-serverless';
import ws from 'ws';
import type { PoolSettings, SkiplockDb } from '../connect.js';

/** Neon's WebSocket Pool: interactive transactions over WebSockets (Neon, or a wsproxy). */
export function neonWsDatabase(settings: PoolSettings): SkiplockDb {
  if (!neonConfig.webSocketConstructor && typeof globalThis.WebSocket === 'undefined') {
    neonConfig.webSocketConstructor = ws;
  }
  const pool = new Pool(settings);
  pool.on('error', () => {});
  return { driver: 'neon-ws', db: drizzle({ client: pool }), interactiveTransactions: true, close: () => pool.end() };
}
