import type { ClaimedJob } from '../base/rows.js';
import type { JobContext } from './jobs.js';
import { type Logger, withFields } from './logger.js';

/** Why a job's signal fired. Recorded as the failure class (timeout, invocation_deadline). */
export class JobAbort extends Error {
  readonly reason: 'timeout' | 'invocation_deadline' | 'lease_lost';
  constructor(reason: JobAbort['reason'], message: string) {
    super(message);
    this.name = reason;
    this.reason = reason;
  }
}

export interface JobRunDeps {
  logger: Logger;
  invocationId: string;
  reportProgress(holder: { id: string; leaseToken: string }, progress: unknown): Promise<boolean>;
  extendLease(holder: { id: string; leaseToken: string }, ms: number): Promise<boolean>;
}

export function jobFields(
  job: { id: string; kind: string; queue: string; attempt: number; correlationId: string | null },
  invocationId: string,
) {
  return {
    invocationId,
    jobId: job.id,
    kind: job.kind,
    queue: job.queue,
    attempt: job.attempt,
    correlationId: job.correlationId,
  };
}

/**
 * One attempt of one job: the handler's context, and the abort that ends waiting for it.
 * The AbortController and the job logger are made only when a handler asks for them — a
 * short job pays for neither (the invocation's single watchdog timer decides timeouts).
 * Plain properties, not #private: a transactional context extends it through its prototype.
 */
export class JobRun implements JobContext {
  readonly id: string;
  readonly kind: string;
  readonly queue: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly correlationId: string | null;
  readonly leaseToken: string;
  /** When this attempt times out (on the invocation's clock). */
  readonly timeoutAt: number;
  readonly job: ClaimedJob;
  /**
   * Mutable state in one shared object: a transactional context extends the run through its
   * prototype, and must see (and cause) the same abort as the run itself.
   */
  readonly _s: {
    controller?: AbortController;
    abortReason?: JobAbort;
    onAbort?: (reason: JobAbort) => void;
    logger?: Logger;
  } = {};
  readonly _deps: JobRunDeps;

  constructor(job: ClaimedJob, timeoutAt: number, deps: JobRunDeps) {
    this.job = job;
    this.id = job.id;
    this.kind = job.kind;
    this.queue = job.queue;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.correlationId = job.correlationId;
    this.leaseToken = job.leaseToken;
    this.timeoutAt = timeoutAt;
    this._deps = deps;
  }

  get signal(): AbortSignal {
    if (!this._s.controller) {
      this._s.controller = new AbortController();
      if (this._s.abortReason) this._s.controller.abort(this._s.abortReason);
    }
    return this._s.controller.signal;
  }

  get logger(): Logger {
    this._s.logger ??= withFields(this._deps.logger, jobFields(this.job, this._deps.invocationId));
    return this._s.logger;
  }

  get aborted(): JobAbort | undefined {
    return this._s.abortReason;
  }

  abort(reason: JobAbort): void {
    if (this._s.abortReason) return;
    this._s.abortReason = reason;
    this._s.controller?.abort(reason);
    this._s.onAbort?.(reason);
  }

  /** Calls `callback` when the attempt is aborted (now, if it already was). */
  _onAbort(callback: (reason: JobAbort) => void): void {
    if (this._s.abortReason) callback(this._s.abortReason);
    else this._s.onAbort = callback;
  }

  async reportProgress(progress: unknown): Promise<boolean> {
    return this._fenced(await this._deps.reportProgress(this.job, progress));
  }

  async extendLease(ms: number): Promise<boolean> {
    return this._fenced(await this._deps.extendLease(this.job, ms));
  }

  _fenced(ok: boolean): boolean {
    if (!ok) this.abort(new JobAbort('lease_lost', 'the lease was lost to another holder'));
    return ok;
  }
}
