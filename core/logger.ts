import { configure } from 'safe-stable-stringify';

/** A structured logger: one JSON object per line by default. Plug in pino, Powertools, etc. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
  /** Optional: whether lines at `level` are written at all (lets callers skip building them). */
  isEnabled?(level: 'debug' | 'info' | 'warn' | 'error'): boolean;
}

type Level = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** JSON lines to `write` (stdout by default), at `level` and above. @defaultValue level 'info' */
export function jsonLogger(options: { level?: Level; write?: (line: string) => void } = {}): Logger {
  const min = LEVELS[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const log = (level: Level) => (message: string, fields?: Record<string, unknown>) => {
    if (LEVELS[level] < min) return;
    const time = new Date().toISOString();
    let record: Record<string, unknown>;
    try {
      record = { level, time, msg: message, ...fields };
    } catch {
      // A getter on `fields` threw while they were copied.
      record = { level, time, msg: message, logError: 'the fields could not be read' };
    }
    write(safeStringify(record));
  };
  return {
    debug: log('debug'),
    info: log('info'),
    warn: log('warn'),
    error: log('error'),
    isEnabled: (level) => LEVELS[level] >= min,
  };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {}, isEnabled: () => false };

/**
 * safe-stable-stringify, set for logs and failure records: a value referenced twice is written
 * twice and only a real cycle becomes "[Circular]"; a bigint becomes a string (a JSON number
 * would lose digits); a toJSON or getter that throws is replaced by its message; keys keep
 * their order (level and msg first).
 */
const stringify = configure({ bigint: 'string', circularValue: '[Circular]', deterministic: false, safe: true });

/** JSON of anything, for a log line or a failure record: never throws (a log line must not). */
export function safeStringify(value: unknown): string {
  try {
    return stringify(value) as string;
  } catch (err) {
    // e.g. a Proxy whose traps throw, which `safe` does not cover.
    return JSON.stringify(`[unserializable: ${err instanceof Error ? err.name : typeof err}]`);
  }
}

/** A logger that adds `fields` to every line (a job's id, kind, attempt…). */
export function withFields(logger: Logger, fields: Record<string, unknown>): Logger {
  return {
    debug: (message, extra) => logger.debug(message, { ...fields, ...extra }),
    info: (message, extra) => logger.info(message, { ...fields, ...extra }),
    warn: (message, extra) => logger.warn(message, { ...fields, ...extra }),
    error: (message, extra) => logger.error(message, { ...fields, ...extra }),
    isEnabled: logger.isEnabled ? (level) => logger.isEnabled?.(level) ?? true : undefined,
  };
}
