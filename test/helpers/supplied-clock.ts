import { beforeEach } from 'vitest';

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
