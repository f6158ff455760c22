import { ConfigError } from '../base/errors.js';

/**
 * How long to wait before the next attempt.
 * - exponential: `baseMs * factor^(attempt-1)`, capped at `maxMs`, then reduced by up to
 *   `jitter` (a fraction) at random so retries of many jobs spread out.
 * - constant: always `delayMs` (optionally jittered the same way).
 * - a function: `(attempt, error) => ms`, for anything else.
 */
export type BackoffOption =
  | { type: 'exponential'; baseMs?: number; factor?: number; maxMs?: number; jitter?: number }
  | { type: 'constant'; delayMs: number; jitter?: number }
  | ((attempt: number, error: unknown) => number);

/** attempt is the attempt that just failed (1 for the first). Returns milliseconds. */
export type BackoffFn = (attempt: number, error: unknown, random?: () => number) => number;

export const BACKOFF_DEFAULTS = { baseMs: 1_000, factor: 2, maxMs: 3_600_000, jitter: 0.25 } as const;

export function toBackoff(option: BackoffOption | undefined): BackoffFn {
  if (typeof option === 'function') {
    return (attempt, error) => clampDelay(option(attempt, error));
  }
  if (!option || option.type === 'exponential') {
    const { baseMs, factor, maxMs, jitter } = { ...BACKOFF_DEFAULTS, ...option };
    assertFraction(jitter);
    if (!(baseMs >= 0 && factor >= 1 && maxMs >= baseMs)) {
      throw new ConfigError('exponential backoff needs baseMs >= 0, factor >= 1 and maxMs >= baseMs');
    }
    return (attempt, _error, random = Math.random) => {
      const raw = Math.min(maxMs, baseMs * factor ** Math.max(0, attempt - 1));
      return clampDelay(raw * (1 - jitter * random()));
    };
  }
  if (option.type === 'constant') {
    const jitter = option.jitter ?? 0;
    assertFraction(jitter);
    if (!(option.delayMs >= 0)) throw new ConfigError('constant backoff needs delayMs >= 0');
    return (_attempt, _error, random = Math.random) => clampDelay(option.delayMs * (1 - jitter * random()));
  }
  throw new ConfigError(`unknown backoff type ${JSON.stringify((option as { type: unknown }).type)}`);
}

function assertFraction(jitter: number): void {
  if (!(jitter >= 0 && jitter <= 1)) throw new ConfigError('backoff jitter must be between 0 and 1');
}

/** Whole milliseconds, never negative, at most 365 days (a custom function can return anything). */
function clampDelay(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0) return 0;
  return Math.min(Math.round(ms), 365 * 24 * 3_600_000);
}
