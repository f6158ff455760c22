import { createHash } from 'node:crypto';
import { neonConfig } from '@neondatabase/serverless';
import { getTableName, is } from 'drizzle-orm';
import { PgTable } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, inject } from 'vitest';
import { type ConnectOptions, connect, type Driver, type NeonOptions, type SkiplockDb } from '../../db/connect.js';
import { applyNeonOptions } from '../../db/drivers/neon-config.js';
import { migrate } from '../../db/migrate.js';
import * as schemaModule from '../../db/schema.js';
import { localNeonOptions } from '../../testing/neon-local.js';

/** The driver this test project runs under (vitest projects pg, neon-ws, neon-http). */
export function testDriver(): Driver {
  const driver = process.env.SKIPLOCK_TEST_DRIVER ?? 'pg';
  if (driver !== 'pg' && driver !== 'neon-ws' && driver !== 'neon-http') throw new Error(`bad driver ${driver}`);
  return driver;
}

/** Neon's drivers pointed at the run's local stand-ins (test/global-setup.ts starts them). */
export function testNeonOptions(): NeonOptions {
  return localNeonOptions({ wsProxyPort: inject('neonWsProxyPort'), httpUrl: inject('neonHttpUrl') });
}

/**
 * Applies those options process-wide, for code that connects from its environment (the Lambda
 * and Vercel adapters) rather than through openDb().
 */
export function configureNeonForLocalPostgres(): void {
  applyNeonOptions(testNeonOptions());
}

/**
 * The environment variables that point the CLI and the deployed entries at the run's stand-ins,
 * as docs/testing-your-app.md tells a user to set them.
 */
export function testNeonEnv(): { SKIPLOCK_NEON_WS_PROXY: string; SKIPLOCK_NEON_FETCH_ENDPOINT: string } {
  return {
    SKIPLOCK_NEON_WS_PROXY: `127.0.0.1:${inject('neonWsProxyPort')}/v1`,
    SKIPLOCK_NEON_FETCH_ENDPOINT: inject('neonHttpUrl'),
  };
}

/**
 * Puts Neon's process-wide settings back to the driver's defaults (its getters fall back to them
 * when a setting is undefined), so that only what a test passes itself reaches the stand-ins.
 */
export function forgetNeonOptions(): void {
  const settable = neonConfig as unknown as Record<string, unknown>;
  for (const key of Object.keys(testNeonOptions())) settable[key] = undefined;
}

export function databaseUrl(): string {
  return inject('databaseUrl');
}

/** A connection through the driver under test. */
export function openDb(options: Partial<ConnectOptions> & { driver?: Driver } = {}): SkiplockDb {
  return connect({ connectionString: databaseUrl(), driver: testDriver(), neon: testNeonOptions(), ...options });
}

/** A plain node-postgres pool for looking at rows independently of the driver under test. */
export function openAdminPool(connectionString = databaseUrl(), max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  // A backend ended from outside (a dropped database, a terminated backend) emits 'error' on its
  // client, even while pool.end() is closing it: unheard, it fails the whole run.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * Every table of skiplock's schema, read from db/schema.ts (not the migration journal, which is not
 * there): what a test file empties before each test, so a table added to the schema is emptied too.
 */
export const TABLES: readonly string[] = [
  ...new Set(
    Object.values(schemaModule as Record<string, unknown>)
      .filter((value): value is PgTable => is(value, PgTable))
      .map((table) => getTableName(table)),
  ),
].sort();

/** Empties every table of `schema` (one statement, so foreign keys between them do not matter). */
export async function truncateTables(admin: pg.Pool, schema: string): Promise<void> {
  await admin.query(`truncate ${TABLES.map((table) => `"${schema}"."${table}"`).join(', ')}`);
}

/** A schema name unique to this test file and driver, so files run in parallel. */
export function schemaFor(label: string): string {
  // SKIPLOCK_TEST_RUN lets two runs share one database (each gets its own schemas).
  const run = process.env.SKIPLOCK_TEST_RUN ?? '';
  const hash = createHash('sha1').update(`${label}:${testDriver()}:${run}`).digest('hex').slice(0, 10);
  return `t_${testDriver().replace('-', '_')}_${hash}`;
}

/** Drops and re-creates `schema` with skiplock's migrations, through the driver under test. */
export async function freshSchema(db: SkiplockDb, admin: pg.Pool, schema: string): Promise<void> {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await migrate(db, { schema });
}

export interface TestContext {
  db: SkiplockDb;
  admin: pg.Pool;
  schema: string;
  close(): Promise<void>;
}

/** One connection, an admin pool and a fresh schema for a test file. */
export async function setupTestSchema(label: string): Promise<TestContext> {
  const db = openDb();
  const admin = openAdminPool();
  const schema = schemaFor(label);
  await freshSchema(db, admin, schema);
  return {
    db,
    admin,
    schema,
    close: async () => {
      await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
      await db.close();
      await admin.end();
    },
  };
}

/**
 * Registers the usual hooks of a test file: a fresh schema before all tests (handed to
 * `ready`), its removal after, and every table emptied before each test (TABLES).
 */
export function useTestSchema(label: string, ready: (t: TestContext) => void): void {
  let ctx: TestContext | undefined;
  beforeAll(async () => {
    ctx = await setupTestSchema(label);
    ready(ctx);
  });
  afterAll(() => ctx?.close());
  beforeEach(async () => {
    if (ctx) await truncateTables(ctx.admin, ctx.schema);
  });
}
