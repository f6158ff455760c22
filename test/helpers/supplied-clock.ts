import { beforeEach } from 'vitest';
import { ManualClock } from '../../testing/clock.js';

/**
 * The database clock a test supplies to its statements: each test starts a minute after its jobs
 * were enqueued (on the real clock), on a whole second, so they are due; every later moment is
 * `at(ms)`, that start plus some milliseconds.
 */
export function useSuppliedClock(): { at: (ms: number) => Date; start: () => Date } {
  let t0 = new Date();
  beforeEach(() => {
    t0 = new Date(Math.ceil(Date.now() / 1000) * 1000 + 60_000);
  });
  return { at: (ms) => new Date(t0.getTime() + ms), start: () => t0 };
}

/** A manual clock that reports the timers set for between `min` and `max` ms (the rate waits). */
export class WatchingClock extends ManualClock {
  #watch: { min: number; max: number; resolve: (ms: number) => void } | undefined;

  override setTimer(fn: () => void, ms: number): () => void {
    const cancel = super.setTimer(fn, ms);
    const w = this.#watch;
    if (w && ms >= w.min && ms <= w.max) {
      this.#watch = undefined;
      w.resolve(ms);
    }
    return cancel;
  }

  nextTimer(min: number, max: number): Promise<number> {
    return new Promise((resolve) => {
      this.#watch = { min, max, resolve };
    });
  }
}
