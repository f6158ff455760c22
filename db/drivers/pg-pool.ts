import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import pg from 'pg';
import type { PoolSettings } from '../connection-options.js';
import { renderSql } from '../render.js';
import { type HotStatement, hotTransaction } from './pg-hot.js';
import { jitOff } from './session.js';

/**
 * The node-postgres pool both pg drivers share (pg.ts under Drizzle, pg-lean.ts without): its
 * connections' settings, its error listeners, the named statements.
 */
export function openPgPool(settings: PoolSettings): pg.Pool {
  const { neon: _neon, jit, preparedStatements: _named, ...poolSettings } = settings;
  const onConnect = jit ? undefined : jitOff;
  const pool = new pg.Pool({ ...poolSettings, ...(onConnect ? { onConnect } : {}) });
  // An idle client's error (server restart, network drop) must not crash the process, nor one a
  // transaction holds checked out: its next statement fails instead (the chaos harness found it).
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** Returned as the text Postgres sent, as Drizzle's node-postgres session returns them: timestamps, dates, intervals and their arrays. */
const RAW_TYPES = new Set([1184, 1114, 1082, 1186, 1231, 1115, 1185, 1187, 1182]);
export const PG_TYPES = {
  getTypeParser: (oid: number, format?: string) =>
    RAW_TYPES.has(oid) ? (value: string) => value : pg.types.getTypeParser(oid, format as 'text'),
} as pg.CustomTypesConfig;

/** Distinct statement texts one pool names; past it, unnamed (a text that varied would prepare without end). */
const MAX_NAMED = 64;
/** A pooler that cannot carry named statements: the name unknown on the server it reached, or already there. */
const REFUSED_BY_POOLER = new Set(['26000', '42P05']);

/**
 * The hot statements (the claim, the settle) as named prepared statements, each in a transaction of
 * its own under HOT_PLANS (pg-hot.ts): node-postgres parses each name once per connection, and the
 * server plans it once. The name is a hash of the text, so one name is always one statement, wherever
 * it lands. A refusal from a pooler that cannot carry named statements (the statement was parsed on
 * another server connection) happens before anything ran and rolls the transaction back: the
 * statement is sent again unnamed, and so is every later one of this pool.
 */
export function namedRunner(pool: pg.Pool): (statement: SQL) => Promise<unknown[]> {
  const names = new Map<string, string>();
  let refused = false;
  return async (statement) => {
    const { sql: text, params: values } = renderSql(statement);
    let name = refused ? undefined : names.get(text);
    if (!refused && !name && names.size < MAX_NAMED) {
      name = `skiplock_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
      names.set(text, name);
    }
    if (!name) return (await pool.query({ text, values, types: PG_TYPES })).rows;
    const named = { name, text, values, types: PG_TYPES };
    try {
      return await withClient(pool, (client) => runHot(client, named));
    } catch (err) {
      if (!REFUSED_BY_POOLER.has((err as { code?: string }).code ?? '')) throw err;
      refused = true;
      return (await pool.query({ text, values, types: PG_TYPES })).rows;
    }
  };
}

/** The statement in a transaction of its own under HOT_PLANS, answered once (pg-hot.ts). */
function runHot(client: pg.PoolClient, statement: HotStatement): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    client.query(hotTransaction(statement, (error, rows) => (error ? reject(error) : resolve(rows ?? []))));
  });
}

/**
 * Runs `work` on one connection of the pool and gives it back. After a failure the transaction is
 * rolled back (a second ROLLBACK after Drizzle's own is a no-op); a connection that cannot even do
 * that is destroyed, never handed out again — a BEGIN or ROLLBACK lost with the socket would
 * otherwise leave the pool a client in an unknown state (the chaos harness found it under Drizzle).
 */
export async function withClient<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return await work(client);
  } catch (error) {
    await client.query('rollback').catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error('rollback failed');
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
