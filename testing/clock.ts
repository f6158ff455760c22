import type { Clock } from '../core/clock.js';

export type { Clock };

/**
 * A clock that moves only when told to, for `createWorker({ clock })`: "this handler took 2 s"
 * or "the invocation's deadline has come" without waiting. It measures only the invocation's
 * own budget (timeouts, the deadline, flush timers); every job timestamp is compared on the
 * database's clock, or at a TestTime given to runJobs (time.ts) — the two clocks move apart.
 *
 * - `now()`: milliseconds on this clock; starts at `start`.
 * - `setTimer(fn, ms)`: runs `fn` once `advance` has moved the clock `ms` past now; returns a
 *   function that cancels it.
 * - `advance(ms)`: moves the clock and runs, in order, every timer that came due.
 * - `pending`: how many timers are waiting.
 */
export class ManualClock implements Clock {
  #now: number;
  #timers: { at: number; fn: () => void; cancelled: boolean }[] = [];

  constructor(start = 1_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): () => void {
    const timer = { at: this.#now + Math.max(0, ms), fn, cancelled: false };
    this.#timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  advance(ms: number): void {
    this.#now += ms;
    const due = this.#timers.filter((t) => !t.cancelled && t.at <= this.#now).sort((a, b) => a.at - b.at);
    this.#timers = this.#timers.filter((t) => !due.includes(t) && !t.cancelled);
    for (const timer of due) timer.fn();
  }

  get pending(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }
}
