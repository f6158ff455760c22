import type { Clock } from '../../core/clock.js';

/** A clock that moves only when told to: "this handler took 2 s" without waiting 2 s. */
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
    const due = this.#timers.filter((t) => !t.cancelled && t.at <= this.#now);
    this.#timers = this.#timers.filter((t) => !due.includes(t));
    for (const timer of due) timer.fn();
  }
}
