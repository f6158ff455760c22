import type { SQL } from 'drizzle-orm';
import {
  DatabaseError,
  DatabaseUnreachableError,
  NotMigratedError,
  OutcomeUnknownError,
  SchemaOutdatedError,
  SkiplockError,
} from '../base/errors.js';
import { DEFAULT_SCHEMA } from '../base/identifiers.js';
import { scrubSecrets } from '../base/scrub-secrets.js';
import type { Executor, HotStatementHint } from './executor.js';

/** Runs one statement and returns its rows, turning driver failures into named errors. */
export async function queryRows<T>(executor: Executor, query: SQL, schema: string): Promise<T[]> {
  try {
    return (await executor.query(query)) as T[];
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/** queryRows for the hot statements (the claim, the settle): sent the driver's own way (Executor.hot). */
export async function queryHotRows<T>(
  executor: Executor,
  query: SQL,
  schema: string,
  hint: HotStatementHint = { cheap: false },
): Promise<T[]> {
  try {
    return (await executor.hot(query, hint)) as T[];
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/** SQLSTATEs that mean our tables are not there. */
const NOT_MIGRATED = new Set(['42P01', '3F000']);
/** SQLSTATEs that mean a column or function this code uses is not there: the schema is older than the code. */
const OUTDATED = new Set(['42703', '42883']);
/**
 * SQLSTATEs a server sends before it runs anything: a login refused, no such database, too many
 * connections, a server starting or unable to take the connection.
 */
const NEVER_RAN = new Set(['28P01', '28000', '3D000', '53300', '57P03', '08001', '08004']);
/** Error codes of a connection that could not be opened: the statement was never sent. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
/**
 * Words of a connection that could not be opened: node-postgres' (not in time), Deno's fetch (it
 * sets no code; refused or not found: `client error (Connect): tcp connect error: …`, `… (Connect):
 * dns error: …`), Workers' `cloudflare:sockets` (`cannot connect to the specified address`).
 */
const NOT_SENT_MESSAGE =
  /timeout exceeded when trying to connect|connection terminated due to connection timeout|\b(ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH)\b|\bbad port\b|invalid url|client error \(connect\)|cannot connect to the specified address/i;
/** Error codes and words of a connection that failed with a statement in flight. */
const IN_FLIGHT_CODES = new Set([
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_ABORTED',
  'ABORT_ERR',
]);
// Workers' fetch says `Network connection lost.` whether or not the request left: it may have.
const IN_FLIGHT_MESSAGE =
  /connection terminated|query read timeout|socket hang up|other side closed|fetch failed|server error \(http status 5|aborted|timeout|connection ended|closed the connection|websocket|network connection lost/i;

/**
 * What any driver threw as skiplock's errors (exported as `toSkiplockError` from 'skiplock': your own
 * transaction's COMMIT, your neon-http batch): OutcomeUnknownError, DatabaseUnreachableError, or a
 * DatabaseError with its SQLSTATE.
 *
 * Finds the driver error under Drizzle's wrapper and keeps only what is safe to show:
 * Drizzle's own message repeats the SQL and its parameters (payloads), and node-postgres
 * sometimes echoes the connection string. A failure without a SQLSTATE is a connection's: one that
 * could not be opened (DatabaseUnreachableError: nothing was sent) or one that broke with the
 * statement in flight (OutcomeUnknownError: it may have committed).
 */
export function toSkiplockError(err: unknown, schema: string = DEFAULT_SCHEMA): SkiplockError {
  if (err instanceof SkiplockError) return err;
  const chain = causeChain(err);
  const driverError = findDriverError(chain, err);
  const sqlState = driverError?.code;
  if (sqlState && NOT_MIGRATED.has(sqlState)) return new NotMigratedError(schema);
  if (sqlState && OUTDATED.has(sqlState) && driverError) return new SchemaOutdatedError(schema, driverError.message);
  const message = scrubSecrets(driverError?.message ?? describeThrown(err));
  if (sqlState) {
    return NEVER_RAN.has(sqlState)
      ? new DatabaseUnreachableError(message, sqlState)
      : new DatabaseError(message, sqlState);
  }
  const codes = chain.map((link) => (link as { code?: unknown }).code).filter((c) => typeof c === 'string');
  const words = chain.map((link) => describeThrown(link)).join(' ');
  if (codes.some((c) => NOT_SENT_CODES.has(c)) || NOT_SENT_MESSAGE.test(words)) {
    return new DatabaseUnreachableError(message);
  }
  const names = chain.map((link) => (link instanceof Error ? link.name : ''));
  if (
    codes.some((c) => IN_FLIGHT_CODES.has(c)) ||
    names.includes('AbortError') ||
    names.includes('TimeoutError') ||
    IN_FLIGHT_MESSAGE.test(words)
  ) {
    return new OutcomeUnknownError(message);
  }
  return new DatabaseError(message, undefined);
}

/**
 * Whether a failure is the connection's (none made, refused, lost, the server shutting down) rather
 * than a statement the server answered with an error: no SQLSTATE, or class 08 (connection), 28
 * (authorization), 3D (no such database), 53 (out of connections or memory), 57P (shutdown).
 */
export function isConnectionFailure(sqlState: string | undefined): boolean {
  return sqlState === undefined || /^(08|28|3D|53|57P)/.test(sqlState);
}

/** The driver's own message and SQLSTATE, scrubbed of credentials, with no named-error mapping. */
export function driverFailure(err: unknown): { message: string; sqlState: string | undefined } {
  if (err instanceof DatabaseError) return { message: err.message, sqlState: err.sqlState };
  const driverError = findDriverError(causeChain(err), err);
  return { message: scrubSecrets(driverError?.message ?? describeThrown(err)), sqlState: driverError?.code };
}

export function sqlStateOf(err: unknown): string | undefined {
  if (err instanceof DatabaseError) return err.sqlState;
  return findDriverError(causeChain(err), err)?.code;
}

/**
 * What was thrown and what it wraps: Drizzle's wrapper, the driver's error, what that wraps.
 * Drivers do not always throw Errors or use `cause`: Neon's HTTP driver keeps fetch's error in
 * `sourceError`, and its WebSocket Pool rejects with the socket's ErrorEvent (`error`).
 */
function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  const queue: unknown[] = [err];
  while (queue.length > 0 && chain.length < 8) {
    const current = queue.shift();
    if (current === undefined || current === null || chain.includes(current)) continue;
    chain.push(current);
    if (typeof current !== 'object') continue;
    const { cause, sourceError, error, errors } = current as Record<string, unknown>;
    queue.push(cause, sourceError, error);
    if (Array.isArray(errors)) queue.push(errors[0]);
  }
  return chain;
}

function findDriverError(chain: unknown[], err: unknown): { code?: string; message: string } | undefined {
  for (const link of chain) {
    if (!(link instanceof Error)) continue;
    const code = (link as { code?: unknown }).code;
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return { code, message: link.message };
  }
  // No SQLSTATE: a connection-level failure. Use the innermost message (Drizzle's outer
  // "Failed query: …" would leak the statement's parameters).
  const innermost = chain[chain.length - 1];
  if (innermost !== err) return { message: describeThrown(innermost) };
  if (err instanceof Error && err.message.startsWith('Failed query:')) return { message: 'query failed' };
  return undefined;
}

/**
 * A readable message for anything a driver throws: an Error's message (or, for an empty
 * AggregateError, its first error's), an event's message or error or type; never "[object Object]".
 */
function describeThrown(thrown: unknown, depth = 0): string {
  if (thrown instanceof Error) {
    if (thrown.message) return thrown.message;
    const first = (thrown as { errors?: unknown }).errors;
    if (Array.isArray(first) && first.length > 0 && depth < 3) return describeThrown(first[0], depth + 1);
    return thrown.name || 'Error';
  }
  if (typeof thrown === 'object' && thrown !== null) {
    const { message, error, type } = thrown as { message?: unknown; error?: unknown; type?: unknown };
    if (typeof message === 'string' && message) return message;
    if (error !== undefined && error !== null && error !== thrown && depth < 3) return describeThrown(error, depth + 1);
    const name = thrown.constructor?.name && thrown.constructor.name !== 'Object' ? thrown.constructor.name : 'error';
    return typeof type === 'string' && type ? `${name} (${type})` : name;
  }
  return String(thrown);
}
