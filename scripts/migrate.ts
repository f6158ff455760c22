/**
 * `npm run migrate`: applies skiplock's migrations to DATABASE_URL.
 * SKIPLOCK_SCHEMA (default skiplock) and SKIPLOCK_DRIVER (default pg) are honoured.
 */
import { SkiplockError } from '../base/errors.js';
import { connect, type Driver } from '../db/connect.js';
import { migrate } from '../db/migrate.js';

const connectionString = process.env.DATABASE_URL;
if (!connectionString) {
  console.error('DATABASE_URL is not set: point it at your Postgres, e.g. postgres://user:password@host:5432/db');
  process.exit(2);
}
try {
  const db = connect({ connectionString, driver: (process.env.SKIPLOCK_DRIVER ?? 'pg') as Driver });
  try {
    const result = await migrate(db, { schema: process.env.SKIPLOCK_SCHEMA });
    console.log(
      result.recorded.length
        ? `schema "${result.schema}" already had this version's schema: recorded ${result.recorded.join(', ')}`
        : result.applied.length
          ? `migrated schema "${result.schema}": applied ${result.applied.join(', ')}`
          : `schema "${result.schema}" is up to date`,
    );
    if (result.rebuiltIndexes.length) console.log(`built again INVALID index ${result.rebuiltIndexes.join(', ')}`);
  } finally {
    await db.close();
  }
} catch (err) {
  console.error(`migrate failed: ${err instanceof SkiplockError ? err.message : 'unexpected error'}`);
  process.exit(1);
}
