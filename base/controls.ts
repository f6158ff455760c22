/**
 * The vocabulary of the controls — the rules a claim obeys besides priority and run_at — as the code
 * declares them. Shared by the core (which reads them from queue and kind definitions) and db/
 * (whose claim enforces them); the run-time overrides live with their statements.
 */

/**
 * What a concurrency limit counts: `queue` — running jobs in the queue `name`; `kind` — running
 * jobs of the kind `name`; `key` — running jobs of each concurrency key in the queue `name`.
 */
export type LimitScope = 'queue' | 'kind' | 'key';

/** A limit as the code declares it (queue definitions and kind options). */
export interface DeclaredLimit {
  scope: LimitScope;
  name: string;
  maxRunning: number;
}

/**
 * What a rate limit counts (job starts, rescues included): `queue` — starts in the queue `name`;
 * `kind` — starts of the kind `name`; `key` — starts of each concurrency key of the queue `name`;
 * `destination` — starts of jobs for the destination `name`, or, for `*`, for each destination
 * without a rate of its own.
 */
export type RateLimitScope = 'queue' | 'kind' | 'key' | 'destination';

/** A rate as the code declares it: at most `maxStarts` starts in any `periodMs`. */
export interface DeclaredRateLimit {
  scope: RateLimitScope;
  name: string;
  maxStarts: number;
  periodMs: number;
}

/** A run window as the code declares it, on a kind or on a queue (see core/run-windows.ts). */
export interface DeclaredWindow {
  scope: 'kind' | 'queue';
  name: string;
  startMinute: number;
  endMinute: number;
  timezone: string;
}
