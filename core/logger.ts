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
    write(safeStringify({ level, time: new Date().toISOString(), msg: message, ...fields }));
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

/** JSON.stringify that survives cycles and bigints (a log line must never throw). */
export function safeStringify(value: unknown): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'object' && v !== null) {
      if (seen.has(v)) return '[Circular]';
      seen.add(v);
    }
    return v;
  });
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
