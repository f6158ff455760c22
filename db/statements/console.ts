import { sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import { nowExpr } from './common.js';

/**
 * The operator console's sessions and login throttle (tables console_sessions, console_logins).
 * Every function that serves the console reads and writes them, so a session and a block hold
 * across instances.
 */

const table = (schema: string, name: string) => sql`${sql.identifier(schema)}.${sql.identifier(name)}`;

export interface ConsoleSessionRow {
  who: string;
  readOnly: boolean;
  csrf: string;
  expiresAt: Date;
}

/** Opens a session (and drops the sessions that have expired, so the table never grows). */
export async function insertConsoleSession(
  db: AnyPgDatabase,
  schema: string,
  session: { id: string; who: string; readOnly: boolean; csrf: string; tokenId: string; client: string; ttlMs: number },
  now?: Date,
): Promise<Date> {
  const sessions = table(schema, 'console_sessions');
  const [row] = await queryRows<{ expires_at: string }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    expired as (delete from ${sessions} where expires_at <= (select now from clock))
    insert into ${sessions} (id, who, read_only, csrf, token_id, client, created_at, expires_at)
    select ${session.id}, ${session.who}, ${session.readOnly}, ${session.csrf}, ${session.tokenId}, ${session.client},
      c.now, c.now + make_interval(secs => ${session.ttlMs / 1000}::float8)
    from clock c
    returning expires_at::text`,
    schema,
  );
  return new Date(row?.expires_at as string);
}

/** The live session with this id, opened by one of the tokens `tokenIds` name; null otherwise. */
export async function findConsoleSession(
  db: AnyPgDatabase,
  schema: string,
  id: string,
  tokenIds: readonly string[],
  now?: Date,
): Promise<ConsoleSessionRow | null> {
  const [row] = await queryRows<{ who: string; read_only: boolean; csrf: string; expires_at: string }>(
    db,
    sql`select who, read_only, csrf, expires_at::text from ${table(schema, 'console_sessions')}
    where id = ${id} and token_id = any(${sql.param(tokenIds)}::text[]) and expires_at > ${nowExpr(now)}`,
    schema,
  );
  return row ? { who: row.who, readOnly: row.read_only, csrf: row.csrf, expiresAt: new Date(row.expires_at) } : null;
}

export async function deleteConsoleSession(db: AnyPgDatabase, schema: string, id: string): Promise<void> {
  await queryRows(db, sql`delete from ${table(schema, 'console_sessions')} where id = ${id}`, schema);
}

/** When the latest block on any of `clients` ends, if one is in force. */
export async function consoleLoginBlockedUntil(
  db: AnyPgDatabase,
  schema: string,
  clients: readonly string[],
  now?: Date,
): Promise<Date | null> {
  const [row] = await queryRows<{ until: string | null }>(
    db,
    sql`select max(blocked_until)::text as until from ${table(schema, 'console_logins')}
    where client = any(${sql.param(clients)}::text[]) and blocked_until > ${nowExpr(now)}`,
    schema,
  );
  return row?.until ? new Date(row.until) : null;
}

export interface LoginThrottle {
  /** Failures a window allows from one client, and from `*` (every client together). */
  perClient: number;
  overall: number;
  windowMs: number;
}

/**
 * Counts a failed login against `client` and against `*`, each in its window (a window that has
 * passed starts over); a count that reaches its limit blocks logins there for one window. Counts of
 * other clients that have run out are deleted on the way.
 */
export async function recordConsoleLoginFailure(
  db: AnyPgDatabase,
  schema: string,
  client: string,
  throttle: LoginThrottle,
  now?: Date,
): Promise<void> {
  const logins = table(schema, 'console_logins');
  const window = sql`make_interval(secs => ${throttle.windowMs / 1000}::float8)`;
  const stale = sql`l.window_started_at <= (select now from clock) - ${window}`;
  const failures = sql`(case when ${stale} then 1 else l.failures + 1 end)`;
  const limit = sql`(case when l.client = '*' then ${throttle.overall}::int else ${throttle.perClient}::int end)`;
  await queryRows(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    -- Other clients' counts whose window and block have passed: gone, so the table never grows.
    stale as (
      delete from ${logins} o where o.client <> all(${sql.param([client, '*'])}::text[])
        and o.window_started_at <= (select now from clock) - ${window}
        and coalesce(o.blocked_until, '-infinity') <= (select now from clock)
    )
    insert into ${logins} as l (client, failures, window_started_at, blocked_until)
    select k.client, 1, c.now, null from unnest(${sql.param([client, '*'])}::text[]) as k(client), clock c
    on conflict (client) do update set
      failures = ${failures},
      window_started_at = case when ${stale} then (select now from clock) else l.window_started_at end,
      blocked_until = case when ${failures} >= ${limit} then (select now from clock) + ${window} else l.blocked_until end`,
    schema,
  );
}

/** A successful login forgets its client's failures (not the overall count). */
export async function clearConsoleLoginFailures(db: AnyPgDatabase, schema: string, client: string): Promise<void> {
  await queryRows(db, sql`delete from ${table(schema, 'console_logins')} where client = ${client}`, schema);
}
