import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import type { NeonDatabase } from 'drizzle-orm/neon-serverless';
import type { NodePgDatabase } from 'drizzle-orm/node-postgres';
import ws from 'ws';
import { type ConnectOptions, poolSettings, type SkiplockDb } from './connection-options.js';
import { neonHttpDatabase } from './drivers/neon-http.js';
import { neonWsDatabase } from './drivers/neon-ws.js';
import { pgDatabase } from './drivers/pg.js';

export {
  type AnyPgDatabase,
  CONNECT_DEFAULTS,
  type ConnectOptions,
  DRIVERS,
  type Driver,
  type DrizzleFactory,
  type NeonOptions,
  type PoolSettings,
  poolSettings,
  type SkiplockConnection,
  type SkiplockDb,
} from './connection-options.js';

/**
 * Opens a Drizzle database on `connectionString` through the chosen driver. With `driver` named in
 * the call, `db` has that driver's own type: neon-http's has `batch` (one transaction, where an
 * enqueue joins your writes: prepareEnqueue).
 */
export function connect(options: ConnectOptions & { driver: 'neon-http' }): SkiplockDb<NeonHttpDatabase>;
export function connect(options: ConnectOptions & { driver: 'neon-ws' }): SkiplockDb<NeonDatabase>;
export function connect(options: ConnectOptions & { driver: 'pg' }): SkiplockDb<NodePgDatabase>;
export function connect(options: ConnectOptions): SkiplockDb;
export function connect(options: ConnectOptions): SkiplockDb {
  const { driver, settings } = poolSettings(options);
  if (driver === 'neon-ws') return neonWsDatabase(settings, ws);
  if (driver === 'neon-http') return neonHttpDatabase(settings);
  return pgDatabase(settings);
}
