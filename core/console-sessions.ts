import { createHash, randomBytes } from 'node:crypto';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockDb } from '../db/connect.js';
import {
  type ConsoleSessionRow,
  clearConsoleLoginFailures,
  consoleLoginBlockedUntil,
  deleteConsoleSession,
  findConsoleSession,
  insertConsoleSession,
  type LoginThrottle,
  recordConsoleLoginFailure,
} from '../db/statements/console.js';

/**
 * Sessions of the operator console, kept in the database so that every instance of the function
 * that serves it sees the same ones. The cookie holds a random secret; the table holds its SHA-256.
 */
interface Options {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** The time the database compares with (tests). @defaultValue the database's clock */
  now?: Date;
}

export type ConsoleSession = ConsoleSessionRow;
export type { LoginThrottle };

const schemaOf = (options: Options) => assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
const idOf = (secret: string) => createHash('sha256').update(secret).digest('hex');
const randomToken = () => randomBytes(32).toString('base64url');

/** A name for an admin token that does not reveal it: sessions it opened end when it changes. */
export function tokenId(token: string): string {
  return createHash('sha256').update(`skiplock console:${token}`).digest('hex').slice(0, 32);
}

/** Opens a session; returns the secret its cookie carries and the session. */
export async function openConsoleSession(
  conn: SkiplockDb,
  request: { who: string; readOnly: boolean; tokenId: string; client: string; ttlMs: number },
  options: Options = {},
): Promise<{ secret: string; session: ConsoleSession }> {
  const secret = randomToken();
  const csrf = randomToken();
  const expiresAt = await insertConsoleSession(
    conn.db,
    schemaOf(options),
    { ...request, id: idOf(secret), csrf },
    options.now,
  );
  return { secret, session: { who: request.who, readOnly: request.readOnly, csrf, expiresAt } };
}

/** The live session a cookie's secret opens, or null (unknown, expired, or not opened by a token `issuedBy` names: tokenIds). */
export async function readConsoleSession(
  conn: SkiplockDb,
  secret: string,
  issuedBy: readonly string[],
  options: Options = {},
): Promise<ConsoleSession | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(secret)) return null;
  return findConsoleSession(conn.db, schemaOf(options), idOf(secret), issuedBy, options.now);
}

export async function closeConsoleSession(conn: SkiplockDb, secret: string, options: Options = {}): Promise<void> {
  await deleteConsoleSession(conn.db, schemaOf(options), idOf(secret));
}

/** When logins from `client` are allowed again, if they are blocked now (by its failures or everyone's). */
export async function consoleLoginBlocked(conn: SkiplockDb, client: string, options: Options = {}) {
  return consoleLoginBlockedUntil(conn.db, schemaOf(options), [client, '*'], options.now);
}

export async function recordFailedConsoleLogin(
  conn: SkiplockDb,
  client: string,
  throttle: LoginThrottle,
  options: Options = {},
): Promise<void> {
  await recordConsoleLoginFailure(conn.db, schemaOf(options), client, throttle, options.now);
}

export async function forgetFailedConsoleLogins(conn: SkiplockDb, client: string, options: Options = {}) {
  await clearConsoleLoginFailures(conn.db, schemaOf(options), client);
}
