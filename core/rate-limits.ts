import type { DeclaredRateLimit, RateLimitScope } from '../base/controls.js';
import { ConfigError, InvalidOptionsError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from '../db/connect.js';
import type { RateLimitOverride } from '../db/statements/rate-limits.js';
import {
  clearRateLimit as clearStatement,
  listRateLimits,
  type RateUse,
  setRateLimit as setStatement,
} from '../db/statements/rate-limits-admin.js';
import { MAX_DESTINATION_LENGTH } from './destinations.js';

/**
 * A rate limit: at most `limit` job starts in any `periodMs`, across every invocation, on the
 * database clock. Strict: a burst of `limit` may start at once, and never more within one period
 * (a sliding window — a token bucket whose every token comes back one period after it was taken).
 * A retry and a rescue are starts too.
 */
export interface RateLimit {
  /** Starts per period: a whole number from 1 to 100,000. */
  limit: number;
  /** The period: from 1,000 ms to 24 hours. @defaultValue 1000 */
  periodMs?: number;
}

export const MAX_RATE_STARTS = 100_000;
export const MIN_RATE_PERIOD_MS = 1_000;
export const MAX_RATE_PERIOD_MS = 86_400_000;

/** Validates a rate (a kind's, a queue's, a worker's, or one set at run time); `Err` says whose error it is. */
export function rateLimitOption(
  owner: string,
  name: string,
  value: unknown,
  Err: typeof ConfigError | typeof InvalidOptionsError = ConfigError,
): { maxStarts: number; periodMs: number } | undefined {
  if (value === undefined) return undefined;
  const r = value as Partial<RateLimit> | null;
  if (r === null || typeof r !== 'object') throw new Err(`${owner}: ${name} must be { limit, periodMs }`);
  const periodMs = r.periodMs ?? 1_000;
  if (typeof r.limit !== 'number' || !Number.isInteger(r.limit) || r.limit < 1 || r.limit > MAX_RATE_STARTS) {
    throw new Err(`${owner}: ${name}.limit must be a whole number from 1 to ${MAX_RATE_STARTS}`);
  }
  if (
    typeof periodMs !== 'number' ||
    !Number.isInteger(periodMs) ||
    periodMs < MIN_RATE_PERIOD_MS ||
    periodMs > MAX_RATE_PERIOD_MS
  ) {
    throw new Err(`${owner}: ${name}.periodMs must be a whole number of milliseconds from 1000 to 86400000`);
  }
  return { maxStarts: r.limit, periodMs };
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, sec: 1_000, m: 60_000, min: 60_000, h: 3_600_000 };

/**
 * Reads a rate written as `10/s`, `100/min`, `5/2s`, `1000/h` or `20/1500ms` (the CLI's form).
 * Returns null when it is not one.
 */
export function parseRate(text: string): RateLimit | null {
  const m = /^\s*(\d+)\s*\/\s*(\d+(?:\.\d+)?)?\s*(ms|s|sec|m|min|h)\s*$/.exec(text);
  if (!m) return null;
  const periodMs = Math.round(Number(m[2] ?? 1) * (UNITS[m[3] as string] as number));
  return { limit: Number(m[1]), periodMs };
}

/** A rate as the CLI and log lines write it: `10/s`, `100/min`, `5 per 2500 ms`. */
export function rateText(r: { maxStarts: number; periodMs: number }): string {
  const unit = r.periodMs === 1_000 ? 's' : r.periodMs === 60_000 ? 'min' : r.periodMs === 3_600_000 ? 'h' : undefined;
  return unit ? `${r.maxStarts}/${unit}` : `${r.maxStarts} per ${r.periodMs} ms`;
}

/**
 * What a rate counts: `{ queue }` — the queue's starts; `{ queue, perKey: true }` — each concurrency
 * key's starts in the queue; `{ kind }` — the kind's; `{ destination }` — the destination's, or, for
 * `'*'`, each destination's that has no rate of its own.
 */
export type RateLimitTarget =
  | { queue: string; perKey?: boolean; kind?: never; destination?: never }
  | { kind: string; queue?: never; perKey?: never; destination?: never }
  | { destination: string; queue?: never; kind?: never; perKey?: never };

export function rateTargetOf(target: RateLimitTarget): { scope: RateLimitScope; name: string } {
  const t = target as { queue?: unknown; kind?: unknown; destination?: unknown; perKey?: unknown };
  const named = [t.queue, t.kind, t.destination].filter((v) => v !== undefined).length;
  if (named !== 1) throw new InvalidOptionsError('name exactly one of queue, kind or destination');
  if (t.perKey !== undefined && typeof t.perKey !== 'boolean')
    throw new InvalidOptionsError('perKey must be a boolean');
  if (t.perKey && t.queue === undefined) throw new InvalidOptionsError('perKey rates are set on a queue');
  if (t.destination !== undefined) {
    const d = t.destination;
    if (typeof d !== 'string' || d.length === 0 || d.length > MAX_DESTINATION_LENGTH) {
      throw new InvalidOptionsError(`destination must be 1-${MAX_DESTINATION_LENGTH} characters (or '*')`);
    }
    return { scope: 'destination', name: d };
  }
  try {
    if (t.kind !== undefined) return { scope: 'kind', name: assertLabel('kind', t.kind as string) };
    return { scope: t.perKey ? 'key' : 'queue', name: assertLabel('queue', t.queue as string) };
  } catch (err) {
    throw new InvalidOptionsError((err as Error).message);
  }
}

export interface RateLimitOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
}

const schemaOf = (options: RateLimitOptions) => assertSchemaName(options.schema ?? DEFAULT_SCHEMA);

/**
 * Sets a rate at run time: from the next claim on, no invocation starts a job that would make more
 * than `rate.limit` start in the target within `rate.periodMs`. It overrides the rate the code
 * declares for the same target until clearRateLimit(). Returns it and the override it replaced.
 */
export async function setRateLimit(
  conn: SkiplockConnection,
  target: RateLimitTarget,
  rate: RateLimit,
  options: RateLimitOptions & { by: string; reason?: string },
): Promise<{ rateLimit: RateLimitOverride; previous: { maxStarts: number; periodMs: number } | null }> {
  const by = typeof options.by === 'string' ? options.by.trim() : '';
  if (by.length === 0 || by.length > 255) {
    throw new InvalidOptionsError('by must name who sets the rate (1-255 characters)');
  }
  if (options.reason !== undefined && (typeof options.reason !== 'string' || options.reason.length > 1000)) {
    throw new InvalidOptionsError('reason must be a string of at most 1000 characters');
  }
  const r = rateLimitOption('rate limit', 'rate', rate ?? null, InvalidOptionsError);
  if (r === undefined) throw new InvalidOptionsError('rate limit: rate must be { limit, periodMs }');
  return setStatement(conn.executor, schemaOf(options), { ...rateTargetOf(target), ...r, by, reason: options.reason });
}

/** Removes a run-time rate: the code's rate for the target, if any, applies again from the next claim. */
export async function clearRateLimit(
  conn: SkiplockConnection,
  target: RateLimitTarget,
  options: RateLimitOptions = {},
): Promise<RateLimitOverride | null> {
  return clearStatement(conn.executor, schemaOf(options), rateTargetOf(target));
}

/**
 * The run-time rates, and the scopes that started jobs within their last period (busiest first):
 * how many, and when the next token comes back. Rates declared only in code are not stored.
 */
export async function rateLimits(
  conn: SkiplockConnection,
  options: RateLimitOptions = {},
): Promise<{ rateLimits: RateLimitOverride[]; use: RateUse[] }> {
  return listRateLimits(conn.executor, schemaOf(options));
}

export type { DeclaredRateLimit, RateLimitOverride, RateLimitScope, RateUse };
