import type { InvocationSummary, WorkerOptions } from '../core/worker.js';
import { createWorker } from '../core/worker.js';

export interface RunJobsOptions extends WorkerOptions {
  /**
   * Time budget of each invocation; a kind is claimed only when its timeoutMs fits in it. An
   * invocation returns as soon as the queue is drained, so a large budget costs nothing.
   * @defaultValue 900000 (Lambda's maximum)
   */
  remainingMs?: number;
  /** Stop after this many invocations even if work remains. @defaultValue 10 */
  maxInvocations?: number;
}

export interface RunJobsResult {
  invocations: InvocationSummary[];
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  cancelled: number;
}

/**
 * Runs worker invocations, as the scheduler would, until one finds nothing to claim (or
 * `maxInvocations` ran). For an application's tests: enqueue, `await runJobs({ db, jobs })`,
 * then assert on what the handlers did. Retries wait for their backoff on the database clock,
 * so a job that failed is claimed again only once its `run_at` has passed.
 */
export async function runJobs(options: RunJobsOptions): Promise<RunJobsResult> {
  const { remainingMs = 900_000, maxInvocations = 10, ...workerOptions } = options;
  const worker = createWorker(workerOptions);
  const result: RunJobsResult = { invocations: [], claimed: 0, completed: 0, retried: 0, dead: 0, cancelled: 0 };
  for (let i = 0; i < maxInvocations; i++) {
    const summary = await worker.runInvocation({ remainingMs });
    result.invocations.push(summary);
    result.claimed += summary.claimed;
    result.completed += summary.completed;
    result.retried += summary.retried;
    result.dead += summary.dead;
    result.cancelled += summary.cancelled;
    if (summary.stoppedBecause === 'error') break;
    if (summary.claimed === 0 && summary.dead === 0) break;
  }
  return result;
}
