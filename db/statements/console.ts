import { sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr } from './common.js';

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
  db: Executor,
  schema: string,
  session: { id: string; who: string; readOnly: boolean; csrf: string; tokenId: string; client: string; ttlMs: number },
  now?: Date,
): Promise<Date> {
  const sessions = table(schema, 'console_sessions');
  const [row] = await queryRows<{ expires_at_ms: number }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    expired as (delete from ${sessions} where expires_at <= (select now from clock))
    insert into ${sessions} (id, who, read_only, csrf, token_id, client, created_at, expires_at)
    select ${session.id}, ${session.who}, ${session.readOnly}, ${session.csrf}, ${session.tokenId}, ${session.client},
      c.now, c.now + make_interval(secs => ${session.ttlMs / 1000}::float8)
    from clock c
    returning ${epochMs(sql`expires_at`)} as expires_at_ms`,
    schema,
  );
  return new Date(row?.expires_at_ms as number);
}

/** The live session with this id, opened by one of the tokens `tokenIds` name; null otherwise. */
export async function findConsoleSession(
  db: Executor,
  schema: string,
  id: string,
  tokenIds: readonly string[],
  now?: Date,
): Promise<ConsoleSessionRow | null> {
  const [row] = await queryRows<{ who: string; read_only: boolean; csrf: string; expires_at_ms: number }>(
    db,
    sql`select who, read_only, csrf, ${epochMs(sql`expires_at`)} as expires_at_ms from ${table(schema, 'console_sessions')}
    where id = ${id} and token_id = any(${sql.param(tokenIds)}::text[]) and expires_at > ${nowExpr(now)}`,
    schema,
  );
  return row ? { who: row.who, readOnly: row.read_only, csrf: row.csrf, expiresAt: new Date(row.expires_at_ms) } : null;
}

export async function deleteConsoleSession(db: Executor, schema: string, id: string): Promise<void> {
  await queryRows(db, sql`delete from ${table(schema, 'console_sessions')} where id = ${id}`, schema);
}

export interface LoginThrottle {
  /** Login attempts a window allows from one client; the next is refused until the window ends. */
  perClient: number;
  /** Failed logins a window may see from every client together before each one is logged as a flood. */
  overall: number;
  windowMs: number;
}

/**
 * Counts a login attempt against `client` and against `*` (all clients), each in its window (a
 * window that has passed starts over), BEFORE the token is compared: concurrent attempts queue on
 * the client's row, so no burst gets more than `perClient` through. An attempt past the limit blocks
 * the client until its window ends (an attempt while blocked changes nothing). Counts of other
 * clients that have run out are deleted on the way, so the table never grows. A right token then
 * takes its attempt back (forgetConsoleLoginAttempts).
 */
export async function recordConsoleLoginAttempt(
  db: Executor,
  schema: string,
  client: string,
  throttle: LoginThrottle,
  now?: Date,
): Promise<{ blockedUntilMs: number | null; overallFailures: number }> {
  const logins = table(schema, 'console_logins');
  const window = sql`make_interval(secs => ${throttle.windowMs / 1000}::float8)`;
  const at = sql`(select now from clock)`;
  const stale = sql`l.window_started_at <= ${at} - ${window}`;
  const blocked = sql`coalesce(l.blocked_until > ${at}, false)`;
  const failures = sql`(case when ${stale} then 1 else l.failures + 1 end)`;
  const [row] = await queryRows<{ blocked_until_ms: number | null; overall: number | null }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    stale as (
      delete from ${logins} o where o.client <> all(${sql.param([client, '*'])}::text[])
        and o.window_started_at <= ${at} - ${window}
        and coalesce(o.blocked_until, '-infinity') <= ${at}
    ),
    counted as (
      insert into ${logins} as l (client, failures, window_started_at, blocked_until)
      select k.client, 1, c.now, null from unnest(${sql.param([client, '*'])}::text[]) as k(client), clock c
      on conflict (client) do update set
        failures = case when ${blocked} then l.failures else ${failures} end,
        window_started_at = case when ${blocked} or not ${stale} then l.window_started_at else ${at} end,
        blocked_until = case when ${blocked} then l.blocked_until
          when l.client <> '*' and ${failures} > ${throttle.perClient}::int then ${at} + ${window} end
      returning l.client, l.failures, l.blocked_until
    )
    select ${epochMs(sql`(select blocked_until from counted where client <> '*')`)} as blocked_until_ms,
      (select failures from counted where client = '*') as overall`,
    schema,
  );
  return { blockedUntilMs: row?.blocked_until_ms ?? null, overallFailures: row?.overall ?? 0 };
}

/** A right token: its client's attempts are forgotten, and the attempt it added to `*` taken back. */
export async function forgetConsoleLoginAttempts(db: Executor, schema: string, client: string): Promise<void> {
  const logins = table(schema, 'console_logins');
  await queryRows(
    db,
    sql`with forgotten as (delete from ${logins} where client = ${client})
    update ${logins} set failures = greatest(failures - 1, 0) where client = '*'`,
    schema,
  );
}
