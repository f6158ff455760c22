import { ConfigError } from '../base/errors.js';
import type { InvocationSummary, WorkerOptions } from '../core/worker/index.js';
import { createWorker } from '../core/worker/index.js';
import type { TestTime } from './time.js';

export interface RunJobsOptions extends WorkerOptions {
  /**
   * Time budget of each invocation; a kind is claimed only when its timeoutMs fits in it. An
   * invocation returns as soon as the queue is drained, so a large budget costs nothing.
   * @defaultValue 900000 (Lambda's maximum)
   */
  remainingMs?: number;
  /** Stop after this many invocations even if work remains. @defaultValue 10 */
  maxInvocations?: number;
  /**
   * Run at this test time instead of the database's clock: run_at, leases, deadlines, back-offs and
   * the steps' sleeps, waits and timeouts are all judged at `time.now()` — first moved up to the
   * database's clock when that is later. Schedules tick at every run (`scheduleTickMs` defaults to 0).
   * @defaultValue unset: the database's clock
   */
  time?: TestTime;
}

export interface RunJobsResult {
  invocations: InvocationSummary[];
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  cancelled: number;
  /** Jobs that went back to the queue to sleep, wait for a signal or continue (durable steps). */
  suspended: number;
}

/**
 * Runs worker invocations, as the scheduler would, until one finds nothing to claim (or
 * `maxInvocations` ran). For an application's tests: enqueue, `await runJobs({ db, jobs })`,
 * then assert on what the handlers did. Retries wait for their backoff on the database clock —
 * or on `time`, which a test moves forward to step through sleeps, waits and back-offs.
 */
export async function runJobs(options: RunJobsOptions): Promise<RunJobsResult> {
  const { remainingMs = 900_000, maxInvocations = 10, time, ...workerOptions } = options;
  if (time !== undefined) {
    if (workerOptions.test?.now) throw new ConfigError('runJobs: pass time or test.now, not both');
    await time.catchUp(workerOptions.db, { schema: workerOptions.schema });
    workerOptions.test = { ...workerOptions.test, now: () => time.now() };
    workerOptions.scheduleTickMs ??= 0;
  }
  const worker = createWorker(workerOptions);
  const result: RunJobsResult = {
    invocations: [],
    claimed: 0,
    completed: 0,
    retried: 0,
    dead: 0,
    cancelled: 0,
    suspended: 0,
  };
  for (let i = 0; i < maxInvocations; i++) {
    const summary = await worker.runInvocation({ remainingMs });
    result.invocations.push(summary);
    result.claimed += summary.claimed;
    result.completed += summary.completed;
    result.retried += summary.retried;
    result.dead += summary.dead;
    result.cancelled += summary.cancelled;
    result.suspended += summary.suspended ?? 0;
    if (summary.stoppedBecause === 'error') break;
    if (summary.claimed === 0 && summary.dead === 0) break;
  }
  return result;
}
