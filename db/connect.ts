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

/** Opens a Drizzle database on `connectionString` through the chosen driver. */
export function connect(options: ConnectOptions): SkiplockDb {
  const { driver, settings } = poolSettings(options);
  if (driver === 'neon-ws') return neonWsDatabase(settings, ws);
  if (driver === 'neon-http') return neonHttpDatabase(settings);
  return pgDatabase(settings);
}
