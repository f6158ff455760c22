/**
 * The invocation loop's sense of time. Only the *invocation budget* is measured in Node;
 * every comparison of job timestamps (run_at, leases, deadlines) happens in the database.
 * Tests supply a manual clock so that "5 seconds left" needs no sleeping.
 */
export interface Clock {
  now(): number;
  /**
   * Calls `fn` after `ms`; returns a function that cancels it. The timer does not keep the process
   * alive (a flush or watchdog timer must not hold a finished process open), unless `keepAlive`:
   * for a wait that is all the invocation is doing, e.g. lingering.
   */
  setTimer(fn: () => void, ms: number, options?: { keepAlive?: boolean }): () => void;
}

export const systemClock: Clock = {
  // Monotonic: a wall-clock step (NTP) must not stretch or shrink an invocation's budget.
  now: () => performance.now(),
  setTimer(fn, ms, options) {
    const timer = setTimeout(fn, Math.max(0, ms));
    if (!options?.keepAlive) timer.unref?.();
    return () => clearTimeout(timer);
  },
};
