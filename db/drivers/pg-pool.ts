import { createHash } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import pg from 'pg';
import type { PoolSettings } from '../connection-options.js';
import { jitOff } from './session.js';

/**
 * The node-postgres pool both pg drivers share (pg.ts under Drizzle, pg-lean.ts without): its
 * connections' settings, its error listeners, the named statements.
 */
export function openPgPool(settings: PoolSettings): pg.Pool {
  const { neon: _neon, jit, preparedStatements, ...poolSettings } = settings;
  const onConnect = async (client: pg.ClientBase) => {
    if (!jit) await jitOff(client);
    // Named statements are planned for their parameters every time, as unnamed ones are. A generic
    // plan, kept for the connection's life, is planned once from the statistics of that moment: one
    // made while the table was small kept its sequential scans as the table grew (the bench's soak:
    // claim p50 1.7 → 4.8 ms in 90 s, against a flat 2.0 ms planned each time).
    if (preparedStatements) await client.query('set plan_cache_mode = force_custom_plan').catch(() => {});
  };
  const pool = new pg.Pool({ ...poolSettings, onConnect });
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
 * The hot statements as named prepared statements: node-postgres parses each name once per
 * connection. The name is a hash of the text, so one name is always one statement, wherever it
 * lands. A refusal from a pooler in transaction mode (the statement was parsed on another server
 * connection) happens before anything ran: the statement is sent again unnamed, and so is every
 * later one of this pool.
 */
export function namedRunner(
  render: (query: SQL) => { sql: string; params: unknown[] },
  pool: { query(config: pg.QueryConfig): Promise<{ rows: unknown[] }> },
): (query: SQL) => Promise<unknown[]> {
  const names = new Map<string, string>();
  let refused = false;
  return async (query) => {
    const { sql: text, params: values } = render(query);
    let name = refused ? undefined : names.get(text);
    if (!refused && !name && names.size < MAX_NAMED) {
      name = `skiplock_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
      names.set(text, name);
    }
    if (!name) return (await pool.query({ text, values, types: PG_TYPES })).rows;
    try {
      return (await pool.query({ name, text, values, types: PG_TYPES })).rows;
    } catch (err) {
      if (!REFUSED_BY_POOLER.has((err as { code?: string }).code ?? '')) throw err;
      refused = true;
      return (await pool.query({ text, values, types: PG_TYPES })).rows;
    }
  };
}
