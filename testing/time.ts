import type { SkiplockConnection } from '../db/connect.js';
import { readDatabaseNow } from '../db/statements/clock.js';

/** A span of time: milliseconds, or days, hours, minutes, seconds and milliseconds added up. */
export type TimeSpan = number | { days?: number; hours?: number; minutes?: number; seconds?: number; ms?: number };

const UNIT_MS = { days: 86_400_000, hours: 3_600_000, minutes: 60_000, seconds: 1_000, ms: 1 } as const;

/**
 * The time a test runs its jobs at — what Temporal's time-skipping test environment and River's
 * TimeStub give: `runJobs({ time })` sends it as "now" with every statement of its invocations, so
 * the claim, the outcomes and back-offs, and the steps' sleeps, waits and their timeouts are all
 * judged at this time instead of the database's clock. "Enqueue; run; advance 7 days; run" steps a
 * week-long flow in milliseconds, and a step due in 7 days is not run a second before.
 *
 * It never runs behind the database's clock: each `runJobs` first moves it up to that clock when the
 * clock is later (`catchUp`), so a job enqueued — or woken by a signal — at the database's clock is
 * due. During one `runJobs` it stands still.
 *
 * - `now()`: the current test time.
 * - `advance(span)`: moves it forward, e.g. `advance({ days: 3 })` or `advance(60_000)`; returns the new time.
 * - `advanceTo(date)`: moves it forward to `date` (never back).
 * - `catchUp(db)`: moves it up to the database's clock when that is later (runJobs does it).
 */
export class TestTime {
  #at: number;

  /** @param start where the time starts. @defaultValue now (Node's clock; the first run catches up with the database's) */
  constructor(start: Date = new Date()) {
    this.#at = checkedDate(start, 'TestTime: start').getTime();
  }

  now(): Date {
    return new Date(this.#at);
  }

  advance(span: TimeSpan): Date {
    const ms = spanMs(span);
    if (!(Number.isFinite(ms) && ms >= 0)) {
      throw new RangeError('TestTime.advance: the span must be a finite number of milliseconds ≥ 0');
    }
    this.#at += ms;
    return this.now();
  }

  advanceTo(at: Date): Date {
    const target = checkedDate(at, 'TestTime.advanceTo').getTime();
    if (target < this.#at) {
      throw new RangeError(
        `TestTime.advanceTo: ${at.toISOString()} is before the test's time (${this.now().toISOString()}); time only moves forward`,
      );
    }
    this.#at = target;
    return this.now();
  }

  async catchUp(db: SkiplockConnection, options: { schema?: string } = {}): Promise<Date> {
    const databaseNow = await readDatabaseNow(db.executor, options.schema ?? 'skiplock');
    this.#at = Math.max(this.#at, databaseNow.getTime());
    return this.now();
  }
}

function spanMs(span: TimeSpan): number {
  if (typeof span === 'number') return span;
  if (span === null || typeof span !== 'object') return Number.NaN;
  let ms = 0;
  for (const [unit, value] of Object.entries(span)) {
    const size = UNIT_MS[unit as keyof typeof UNIT_MS];
    if (size === undefined || typeof value !== 'number') return Number.NaN;
    ms += value * size;
  }
  return ms;
}

function checkedDate(value: Date, what: string): Date {
  if (!(value instanceof Date && Number.isFinite(value.getTime()))) throw new RangeError(`${what} needs a valid Date`);
  return value;
}
