import type { Logger } from '../../core/logger.js';
import { describeError } from '../../core/nudge.js';

/**
 * Where idle ticks keep their hints: a small key-value store shared by the deployment's functions,
 * with expiry. On Vercel, its Runtime Cache (`vercelRuntimeCache`). The Runtime Cache is
 * regional: an app whose functions run in several regions passes a store all of them share (e.g.
 * Upstash Redis: `get` → GET, `set` → SET with PX). A store may lose a value at any time, and may
 * answer slowly or fail: a tick then asks the database, as it would without hints.
 */
export interface IdleHintStore {
  /** The value stored under `key`; null or undefined when there is none or it expired. */
  get(key: string): Promise<string | null | undefined>;
  /** Stores `value` under `key`, kept at least `ttlMs` if the store can (it may drop it sooner). */
  set(key: string, value: string, ttlMs: number): Promise<void>;
}

/**
 * A store in this process's memory, for one long-lived server (`next start` on a machine of your
 * own) and tests: every function must run in this process, or another's writes never reach it.
 */
export function memoryIdleHints(options: { now?: () => number } = {}): IdleHintStore {
  const now = options.now ?? Date.now;
  const values = new Map<string, { value: string; until: number }>();
  return {
    async get(key) {
      const entry = values.get(key);
      if (entry && entry.until <= now()) values.delete(key);
      return entry && entry.until > now() ? entry.value : undefined;
    },
    async set(key, value, ttlMs) {
      values.set(key, { value, until: now() + ttlMs });
    },
  };
}

/**
 * How idle ticks decide. `graceMs`: a hint computed less than this after the last write (the
 * `touched` mark) is not trusted — an enqueue in a caller's transaction marks before its commit, so
 * a tick that read the database between the two may have missed the job. `touchEveryMs`: one
 * process marks at most this often. `storeTimeoutMs`: the longest a tick or an enqueue waits for the
 * store. `busyRewakeMs`: a wake due sooner than this after a tick is no reason to skip the next.
 */
export const IDLE_DEFAULTS = {
  graceMs: 120_000,
  touchEveryMs: 1_000,
  storeTimeoutMs: 1_000,
  busyRewakeMs: 60_000,
} as const;

/** A hint: the tick need not query the database before `wakeAt` (epoch ms), computed at `computedAt`. */
export interface WakeHint {
  wakeAt: number;
  computedAt: number;
}

/** Why a tick queried the database (in its answer's `woke`). */
export type WakeReason = 'no-hint' | 'due' | 'touched' | 'recheck' | 'hints-failed';

export type IdleCheck = { skip: true; hint: WakeHint } | { skip: false; reason: WakeReason };

/**
 * A mark outlives every hint computed before it (the longest recheck is 7 days): expired sooner, an
 * older hint would be trusted again on a daily tick.
 */
const TOUCH_TTL_MS = 8 * 86_400_000;

/** Per store: the last mark of each key this process wrote, and whether a failure was logged. */
const marks = new WeakMap<IdleHintStore, Map<string, { at: number; written: Promise<void> }>>();
const failureLogged = new WeakSet<IdleHintStore>();

/** A hint store's reads and writes for one schema, bounded in time, never throwing. */
export class IdleHints {
  readonly #store: IdleHintStore;
  readonly #schema: string;
  readonly #logger: Logger;
  readonly #prefix: string;
  readonly #hintPrefix: string;

  /** `deployment` (VERCEL_DEPLOYMENT_ID) keys the hints: a new deployment may have new schedules. */
  constructor(store: IdleHintStore, options: { schema: string; logger: Logger; deployment?: string }) {
    this.#store = store;
    this.#schema = options.schema;
    this.#logger = options.logger;
    this.#prefix = `skiplock:${options.schema}:`;
    this.#hintPrefix = `${this.#prefix}${options.deployment ? `${options.deployment}:` : ''}`;
  }

  /** The key of a worker's hint (its name) or maintenance's. */
  keyOf(what: { worker: string } | 'maintenance'): string {
    return what === 'maintenance' ? `${this.#hintPrefix}maintenance` : `${this.#hintPrefix}worker:${what.worker}`;
  }

  /**
   * Whether a cron tick may answer without the database: the hint exists, its wake time is still
   * ahead, nothing was written since `computedAt - graceMs`, and it is younger than `recheckMs`.
   */
  async check(key: string, now: number, recheckMs: number): Promise<IdleCheck> {
    let hint: WakeHint | undefined;
    let touched: number | undefined;
    try {
      const [value, mark] = await this.#bounded(Promise.all([this.#store.get(key), this.#store.get(this.#touchKey)]));
      hint = parseHint(value);
      touched = mark ? Number(mark) : undefined;
    } catch (err) {
      this.#failed(err);
      return { skip: false, reason: 'hints-failed' };
    }
    if (!hint) return { skip: false, reason: 'no-hint' };
    if (touched !== undefined && Number.isFinite(touched) && touched + IDLE_DEFAULTS.graceMs > hint.computedAt) {
      return { skip: false, reason: 'touched' };
    }
    if (now - hint.computedAt >= recheckMs) return { skip: false, reason: 'recheck' };
    if (hint.wakeAt <= now) return { skip: false, reason: 'due' };
    return { skip: true, hint };
  }

  /** Writes a hint, kept until the recheck (and the grace) is past. */
  async record(key: string, hint: WakeHint, recheckMs: number): Promise<void> {
    try {
      const ttlMs = Math.max(hint.wakeAt, hint.computedAt + recheckMs) - hint.computedAt + IDLE_DEFAULTS.graceMs;
      await this.#bounded(this.#store.set(key, JSON.stringify(hint), ttlMs));
    } catch (err) {
      this.#failed(err);
    }
  }

  /**
   * Marks the schema written at `now` (coalesced: once per touchEveryMs per process; a mark within
   * the window waits for the one being written). Every worker's and maintenance's hint computed
   * before `now + graceMs` is then not trusted.
   */
  async touch(now: number): Promise<void> {
    let byKey = marks.get(this.#store);
    if (!byKey) {
      byKey = new Map();
      marks.set(this.#store, byKey);
    }
    const last = byKey.get(this.#touchKey);
    if (last && now - last.at < IDLE_DEFAULTS.touchEveryMs && now >= last.at) return last.written;
    const written = this.#bounded(this.#store.set(this.#touchKey, String(now), TOUCH_TTL_MS)).catch((err: unknown) => {
      byKey.delete(this.#touchKey); // the next write tries again
      this.#failed(err);
    });
    byKey.set(this.#touchKey, { at: now, written });
    return written;
  }

  get #touchKey(): string {
    return `${this.#prefix}touched`;
  }

  #bounded<T>(work: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the store did not answer within ${IDLE_DEFAULTS.storeTimeoutMs} ms`)),
        IDLE_DEFAULTS.storeTimeoutMs,
      );
      timer.unref?.();
    });
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }

  /** Once per store and process: later failures change nothing (each tick queries the database). */
  #failed(err: unknown): void {
    if (failureLogged.has(this.#store)) return;
    failureLogged.add(this.#store);
    this.#logger.warn('idle_hints_failed', {
      schema: this.#schema,
      error: describeError(err),
      effect: 'ticks query the database until the store answers again',
    });
  }
}

function parseHint(value: string | null | undefined): WakeHint | undefined {
  if (typeof value !== 'string') return undefined;
  try {
    const hint = JSON.parse(value) as Partial<WakeHint>;
    if (typeof hint.wakeAt === 'number' && typeof hint.computedAt === 'number') {
      return { wakeAt: hint.wakeAt, computedAt: hint.computedAt };
    }
  } catch {
    // not ours, or cut short: no hint
  }
  return undefined;
}

/**
 * The hint an invocation leaves (IDLE-DESIGN's wake plan): it did work, or something is due within
 * busyRewakeMs → due at once (the next tick queries); a later due time → wake then; nothing due →
 * only the recheck.
 */
export function hintAfterRun(
  computedAt: number,
  endedAt: number,
  nextDueAt: number | null | undefined,
  recheckMs: number,
): WakeHint {
  if (nextDueAt === null) return { wakeAt: computedAt + recheckMs, computedAt };
  if (nextDueAt === undefined || nextDueAt <= endedAt + IDLE_DEFAULTS.busyRewakeMs) {
    return { wakeAt: computedAt, computedAt };
  }
  return { wakeAt: nextDueAt, computedAt };
}
