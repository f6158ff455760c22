import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import pg from 'pg';
import type { PoolSettings } from '../connection-options.js';
import { renderSql } from '../render.js';
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
 * What the hot statements run under, in a transaction of their own: one generic plan per connection,
 * made at the first run and kept (parse, analysis and planning were ~2 ms of each claim's database
 * time), and a plan of index scans wherever one exists. A generic plan is made from the statistics of
 * its moment and kept until the next ANALYZE; made on a near-empty table, it chose sequential scans
 * and kept them as the table grew (the bench's soak: claim p50 1.7 → 4.8 ms in 90 s). With
 * sequential scans off while it is made, it reads the indexes at any size. SET LOCAL ends with the
 * transaction: nothing reaches the pool's other statements, nor, through a pooler in transaction
 * mode, another client's.
 */
export const HOT_PLANS = 'begin; set local plan_cache_mode = force_generic_plan; set local enable_seqscan = off';

/**
 * The hot statements (the claim, the settle) as named prepared statements, each in a transaction of
 * its own under HOT_PLANS: node-postgres parses each name once per connection, and the server plans
 * it once. The name is a hash of the text, so one name is always one statement, wherever it lands.
 * A refusal from a pooler that cannot carry named statements (the statement was parsed on another
 * server connection) happens before anything ran and rolls the transaction back: the statement is
 * sent again unnamed, and so is every later one of this pool.
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
      return await withClient(pool, (client) => hotTransaction(client, named));
    } catch (err) {
      if (!REFUSED_BY_POOLER.has((err as { code?: string }).code ?? '')) throw err;
      refused = true;
      return (await pool.query({ text, values, types: PG_TYPES })).rows;
    }
  };
}

/**
 * BEGIN with HOT_PLANS, the statement, COMMIT: written together (node-postgres's pipeline mode, on
 * for these three only), so the transaction costs no round trip more than the statement alone. Each
 * has its own Sync: when the statement fails, COMMIT ends the aborted transaction as a ROLLBACK.
 */
async function hotTransaction(client: pg.PoolClient, statement: pg.QueryConfig): Promise<unknown[]> {
  const pipelined = client as pg.PoolClient & { pipeline?: boolean; connection?: { stream?: Corkable } };
  pipelined.pipeline = true;
  try {
    // In pipeline mode each query is written as it is given: corked, the three leave in one write
    // (one system call, one wake-up of the server's process) instead of three.
    const stream = pipelined.connection?.stream;
    stream?.cork?.();
    let sent: [Promise<pg.QueryResult>, Promise<pg.QueryResult>, Promise<pg.QueryResult>];
    try {
      sent = [client.query(HOT_PLANS), client.query(statement), client.query('commit')];
    } finally {
      stream?.uncork?.();
    }
    const [begun, ran, committed] = await Promise.allSettled(sent);
    for (const step of [begun, ran, committed]) if (step.status === 'rejected') throw step.reason;
    return (ran as PromiseFulfilledResult<pg.QueryResult>).value.rows;
  } finally {
    // All three answered: the client is idle, as a client out of pipeline mode expects to be.
    pipelined.pipeline = false;
  }
}

/** A socket that can hold its writes back (not every stream pg runs on can: cork is optional). */
type Corkable = { cork?: () => void; uncork?: () => void };

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
