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
 * JSON of anything, for a log line or a failure record: never throws (a log line must not). A
 * value referenced twice is written twice and only a real cycle becomes "[Circular]"; a bigint
 * becomes a string (a JSON number would lose digits); a toJSON or getter that throws is replaced by
 * its message; keys keep their order (level and msg first). Written here rather than bundled: the
 * worker's bundle is held to a size budget.
 */
export function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(toJsonValue(value, [])) ?? 'null';
  } catch (err) {
    // e.g. a Proxy whose traps throw.
    return JSON.stringify(`[unserializable: ${err instanceof Error ? err.name : typeof err}]`);
  }
}

/** `value` as plain JSON data; `ancestors` are the objects being written around it (a cycle's only witness). */
function toJsonValue(value: unknown, ancestors: object[]): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object')
    return typeof value === 'function' || typeof value === 'symbol' ? undefined : value;
  if (ancestors.includes(value)) return '[Circular]';
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    let converted: unknown;
    try {
      converted = toJSON.call(value);
    } catch (err) {
      return thrownText(err);
    }
    return converted === value ? converted : toJsonValue(converted, ancestors);
  }
  ancestors.push(value);
  try {
    if (Array.isArray(value)) return value.map((item) => toJsonValue(item, ancestors) ?? null);
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      let field: unknown;
      try {
        field = (value as Record<string, unknown>)[key];
      } catch (err) {
        field = thrownText(err);
      }
      const converted = toJsonValue(field, ancestors);
      if (converted !== undefined) out[key] = converted;
    }
    return out;
  } finally {
    ancestors.pop();
  }
}

function thrownText(err: unknown): string {
  return `[error: ${err instanceof Error ? err.message : String(err)}]`;
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
