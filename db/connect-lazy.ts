import { ConfigError } from '../base/errors.js';
import { type ConnectOptions, poolSettings, type SkiplockConnection } from './connection-options.js';

/**
 * connect() for the deployed functions, loading only the chosen driver; on pg, without a Drizzle
 * database (db/drivers/pg-lean.ts). Deployed bundles set
 * `process.env.SKIPLOCK_BUNDLE_DRIVER` at build time (esbuild `define`): the branches of the
 * other drivers then fold away and their packages are not bundled at all.
 */
export async function connectLazily(options: ConnectOptions): Promise<SkiplockConnection> {
  const { driver, settings } = poolSettings(options);
  if (process.env.SKIPLOCK_BUNDLE_DRIVER === undefined || process.env.SKIPLOCK_BUNDLE_DRIVER === 'pg') {
    // Without a Drizzle database: what these functions send is skiplock's own statements; a
    // handler's transaction comes from the worker's `drizzle` option (SkiplockDb.drizzleTransaction).
    if (driver === 'pg') return (await import('./drivers/pg-lean.js')).pgLeanDatabase(settings);
  }
  if (process.env.SKIPLOCK_BUNDLE_DRIVER === undefined || process.env.SKIPLOCK_BUNDLE_DRIVER === 'neon-ws') {
    if (driver === 'neon-ws') {
      const { neonWsDatabase } = await import('./drivers/neon-ws.js');
      // Written as one expression so esbuild can fold it (and drop `ws`) in Node 22 bundles.
      const webSocket =
        process.env.SKIPLOCK_BUNDLE_WEBSOCKET !== 'global' && typeof globalThis.WebSocket === 'undefined'
          ? (await import('ws')).default
          : undefined;
      return neonWsDatabase(settings, webSocket);
    }
  }
  if (process.env.SKIPLOCK_BUNDLE_DRIVER === undefined || process.env.SKIPLOCK_BUNDLE_DRIVER === 'neon-http') {
    if (driver === 'neon-http') return (await import('./drivers/neon-http.js')).neonHttpDatabase(settings);
  }
  throw new ConfigError(`this bundle was built for the ${process.env.SKIPLOCK_BUNDLE_DRIVER} driver, not ${driver}`);
}
