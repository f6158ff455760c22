import type { SQL } from 'drizzle-orm';
import { DatabaseError, NotMigratedError, SchemaOutdatedError, SkiplockError } from '../base/errors.js';
import type { AnyPgDatabase } from './connect.js';

/** Runs one statement and returns its rows, turning driver failures into named errors. */
export async function queryRows<T>(db: AnyPgDatabase, query: SQL, schema: string): Promise<T[]> {
  try {
    const result = (await db.execute(query)) as unknown as { rows: T[] };
    return result.rows;
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/**
 * Runs a statement as a named prepared statement on the connection it lands on: parsed and planned
 * once per connection, so each later run skips parse, analysis and planning. Registered by the pg
 * drivers (db/drivers/pg-pool.ts).
 */
export type NamedRunner = (query: SQL) => Promise<unknown[]>;
const namedRunners = new WeakMap<object, NamedRunner>();

export function registerNamedRunner(db: object, run: NamedRunner): void {
  namedRunners.set(db, run);
}

/**
 * queryRows for the hot statements (the claim, the settle): named where the driver registered a
 * runner for `db`, else as queryRows does.
 */
export async function queryRowsNamed<T>(db: AnyPgDatabase, query: SQL, schema: string): Promise<T[]> {
  const run = namedRunners.get(db);
  if (!run) return queryRows<T>(db, query, schema);
  try {
    return (await run(query)) as T[];
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/** SQLSTATEs that mean our tables are not there. */
const NOT_MIGRATED = new Set(['42P01', '3F000']);
/** SQLSTATEs that mean a column or function this code uses is not there: the schema is older than the code. */
const OUTDATED = new Set(['42703', '42883']);

/**
 * Finds the driver error under Drizzle's wrapper and keeps only what is safe to show:
 * Drizzle's own message repeats the SQL and its parameters (payloads), and node-postgres
 * sometimes echoes the connection string.
 */
export function toSkiplockError(err: unknown, schema: string): SkiplockError {
  if (err instanceof SkiplockError) return err;
  const driverError = findDriverError(err);
  const sqlState = driverError?.code;
  if (sqlState && NOT_MIGRATED.has(sqlState)) return new NotMigratedError(schema);
  if (sqlState && OUTDATED.has(sqlState) && driverError) return new SchemaOutdatedError(schema, driverError.message);
  const message = driverError?.message ?? describeThrown(err);
  return new DatabaseError(scrubSecrets(message), sqlState);
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
  const driverError = findDriverError(err);
  return { message: scrubSecrets(driverError?.message ?? describeThrown(err)), sqlState: driverError?.code };
}

export function sqlStateOf(err: unknown): string | undefined {
  if (err instanceof DatabaseError) return err.sqlState;
  return findDriverError(err)?.code;
}

function findDriverError(err: unknown): { code?: string; message: string } | undefined {
  // The cause chain: Drizzle's wrapper, the driver's error, what that wraps. Drivers do not
  // always throw Errors: Neon's WebSocket Pool rejects with the socket's ErrorEvent.
  const chain: unknown[] = [];
  for (let current: unknown = err; current !== undefined && current !== null && chain.length < 5; ) {
    chain.push(current);
    current = typeof current === 'object' ? (current as { cause?: unknown }).cause : undefined;
  }
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

/** Removes credentials from a message: URL passwords, password= pairs, whole connection strings. */
export function scrubSecrets(message: string): string {
  return message
    .replace(/\b(postgres(?:ql)?:\/\/)[^\s'"]*/gi, '$1***')
    .replace(/(password\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi, '$1***');
}
