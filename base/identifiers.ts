import { InvalidIdentifierError } from './errors.js';

/**
 * Postgres identifiers we create ourselves (the skiplock schema) are restricted to
 * lower-case ASCII so that they never need quoting tricks and can never smuggle SQL:
 * every other name (queue, kind) travels as a bound parameter, never as SQL text.
 */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Queue and kind names: printable, URL- and log-safe, at most 64 characters. */
const LABEL = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

export const DEFAULT_SCHEMA = 'skiplock';

/** Whether `name` is a label: a queue, kind, worker, schedule or event name. */
export const isLabel = (name: unknown): name is string => typeof name === 'string' && LABEL.test(name);

export function assertSchemaName(name: string): string {
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name)) {
    throw new InvalidIdentifierError(
      `invalid schema name ${JSON.stringify(name)}: use 1-63 characters of a-z, 0-9 and _, starting with a letter or _`,
    );
  }
  return name;
}

export function assertLabel(what: 'queue' | 'kind' | 'worker name' | 'schedule' | 'event', name: string): string {
  if (typeof name !== 'string' || !LABEL.test(name)) {
    throw new InvalidIdentifierError(
      `invalid ${what} name ${JSON.stringify(name)}: use 1-64 characters of A-Z, a-z, 0-9 and _ . : -, starting with a letter or digit`,
    );
  }
  return name;
}

/** Whether `name` is an IANA time zone this runtime knows (`Europe/Berlin`, `UTC`). */
export function isTimeZone(name: unknown): boolean {
  if (typeof name !== 'string') return false;
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}
