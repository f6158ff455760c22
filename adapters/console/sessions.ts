import { createHash, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { assertSchemaName, DEFAULT_SCHEMA } from '../../base/identifiers.js';
import type { SkiplockConnection } from '../../db/connect.js';
import {
  type ConsoleSessionRow,
  deleteConsoleSession,
  findConsoleSession,
  forgetConsoleLoginAttempts,
  insertConsoleSession,
  type LoginThrottle,
  recordConsoleLoginAttempt,
} from '../../db/statements/console.js';

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
  conn: SkiplockConnection,
  request: { who: string; readOnly: boolean; tokenId: string; client: string; ttlMs: number },
  options: Options = {},
): Promise<{ secret: string; session: ConsoleSession }> {
  const secret = randomToken();
  const csrf = randomToken();
  const expiresAt = await insertConsoleSession(
    conn.executor,
    schemaOf(options),
    { ...request, id: idOf(secret), csrf },
    options.now,
  );
  return { secret, session: { who: request.who, readOnly: request.readOnly, csrf, expiresAt } };
}

/** The live session a cookie's secret opens, or null (unknown, expired, or not opened by a token `issuedBy` names: tokenIds). */
export async function readConsoleSession(
  conn: SkiplockConnection,
  secret: string,
  issuedBy: readonly string[],
  options: Options = {},
): Promise<ConsoleSession | null> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(secret)) return null;
  return findConsoleSession(conn.executor, schemaOf(options), idOf(secret), issuedBy, options.now);
}

export async function closeConsoleSession(
  conn: SkiplockConnection,
  secret: string,
  options: Options = {},
): Promise<void> {
  await deleteConsoleSession(conn.executor, schemaOf(options), idOf(secret));
}

/**
 * What login attempts are counted under: an IPv4 address, the /64 of an IPv6 one (one host
 * usually has a whole /64), or `unknown` — never `*`, the key of every client together.
 */
export function clientKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped && isIP(mapped) === 4) return `ip:${mapped}`;
  if (isIP(address) === 4) return `ip:${address}`;
  if (isIP(address) === 6) {
    const [head = '', tail = ''] = address.toLowerCase().split('::');
    const front = head ? head.split(':') : [];
    const back = address.includes('::') ? (tail ? tail.split(':') : []) : [];
    const groups = [...front, ...Array(Math.max(0, 8 - front.length - back.length)).fill('0'), ...back];
    return `ip6:${groups
      .slice(0, 4)
      .map((g) => g.replace(/^0+(?=.)/, ''))
      .join(':')}::/64`;
  }
  return 'unknown';
}

/**
 * Counts a login attempt from `client` (a clientKey) before its token is compared; says until when
 * it is refused, if it is, and how many attempts every client made together in the window.
 */
export async function countConsoleLoginAttempt(
  conn: SkiplockConnection,
  client: string,
  throttle: LoginThrottle,
  options: Options = {},
): Promise<{ blockedUntil: Date | null; overallFailures: number }> {
  const counted = await recordConsoleLoginAttempt(conn.executor, schemaOf(options), client, throttle, options.now);
  return {
    blockedUntil: counted.blockedUntilMs === null ? null : new Date(counted.blockedUntilMs),
    overallFailures: counted.overallFailures,
  };
}

/** After a right token: the client's attempts are forgotten. */
export async function forgetConsoleLoginAttemptsOf(conn: SkiplockConnection, client: string, options: Options = {}) {
  await forgetConsoleLoginAttempts(conn.executor, schemaOf(options), client);
}
