import type { SQL } from 'drizzle-orm';
import { DatabaseError, NotMigratedError, SkiplockError } from '../base/errors.js';
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

/** SQLSTATEs that mean our tables are not there. */
const NOT_MIGRATED = new Set(['42P01', '3F000']);

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
  const message = driverError?.message ?? (err instanceof Error ? err.message : String(err));
  return new DatabaseError(scrubSecrets(message), sqlState);
}

export function sqlStateOf(err: unknown): string | undefined {
  if (err instanceof DatabaseError) return err.sqlState;
  return findDriverError(err)?.code;
}

function findDriverError(err: unknown): { code?: string; message: string } | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current; depth++) {
    if (current instanceof Error) {
      const code = (current as { code?: unknown }).code;
      if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return { code, message: current.message };
      current = (current as { cause?: unknown }).cause;
    } else {
      break;
    }
  }
  // No SQLSTATE: a connection-level failure. Use the innermost message (Drizzle's outer
  // "Failed query: …" would leak the statement's parameters).
  let innermost: unknown = err;
  while (innermost instanceof Error && innermost.cause instanceof Error) innermost = innermost.cause;
  if (innermost instanceof Error && innermost !== err) return { message: innermost.message };
  if (err instanceof Error && err.message.startsWith('Failed query:')) return { message: 'query failed' };
  return undefined;
}

/** Removes credentials from a message: URL passwords, password= pairs, whole connection strings. */
export function scrubSecrets(message: string): string {
  return message
    .replace(/\b(postgres(?:ql)?:\/\/)[^\s'"]*/gi, '$1***')
    .replace(/(password\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi, '$1***');
}
