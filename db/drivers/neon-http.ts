import { neon } from '@neondatabase/serverless';
import { drizzle } from 'drizzle-orm/neon-http';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { applyNeonOptions } from './neon-config.js';

/** Neon's HTTP driver: one request per statement or batch; no interactive transactions. */
export function neonHttpDatabase(settings: PoolSettings): SkiplockDb {
  applyNeonOptions(settings.neon);
  return {
    driver: 'neon-http',
    db: drizzle({ client: neon(settings.connectionString) }),
    interactiveTransactions: false,
    close: async () => {},
  };
}
