import {
  BatchAnswerError,
  CancelError,
  DiscardError,
  RetryAfterError,
  RetryError,
  SkiplockError,
} from '../../base/errors.js';
import type { ClaimedJob, ParentJob } from '../../base/rows.js';
import { extendLeases } from '../../db/statements/settle.js';
import type { BatchContext, BatchJob, BatchOutcome } from '../batches.js';
import { type Logger, withFields } from '../logger.js';
import type { AttemptTrace } from '../tracing.js';
import { JobAbort } from './abort.js';
import { Attempt, type AttemptHost } from './attempt.js';
import type { Watched } from './deadline.js';
import { type Kind, statementNow } from './settings.js';

/** The outcomes the jobs of a batch made: an answer is taken only from these (no forged or reused objects). */
const issued = new WeakSet<BatchOutcome>();

/**
 * One call of a batch kind's handler with up to `batch.size` jobs. Each job is an Attempt of its
 * own — its lease, its span, its outcome, its log line, its metrics — and the batch only runs the
 * handler and hands each job its answer. The watchdog watches the batch (one timeout for all its
 * jobs, counted from its start); an abort ends every job still running, as a single job's timeout
 * would, and fires the batch's signal. The batch holds one concurrency slot until its last job ended.
 */
export class BatchRun implements Watched {
  readonly kind: Kind;
  readonly members: Attempt[];
  readonly startedAt: number;
  readonly timeoutAt: number;
  /** Watched: set by the watchdog. */
  forgotten = false;
  readonly #host: AttemptHost;
  #running: number;
  #controller: AbortController | undefined = undefined;
  #aborted: JobAbort | undefined = undefined;
  #logger: Logger | undefined = undefined;

  constructor(jobs: readonly ClaimedJob[], kind: Kind, host: AttemptHost) {
    this.kind = kind;
    this.#host = host;
    this.members = jobs.map((job) => new Attempt(job, kind, host, this));
    this.#running = this.members.length;
    this.startedAt = host.settings.clock.now();
    this.timeoutAt = this.startedAt + kind.definition.timeoutMs;
  }

  /** A job of the batch ended: true when it was the last (the slot is free again). */
  memberEnded(): boolean {
    this.#running--;
    return this.#running === 0;
  }

  /** The batch timed out or the invocation reached its deadline: every job still running ends so. */
  abort(reason: JobAbort): void {
    if (this.#aborted) return;
    this.#aborted = reason;
    this.#controller?.abort(reason);
    for (const member of this.members) member.abort(reason);
  }

  /** Starts the handler with the jobs whose payload is valid. The jobs' ends are reported to the host. */
  run(): void {
    const tracing = this.#host.settings.tracing;
    const trace = tracing?.batch?.(this.members.map((m) => m.job));
    const start = () => {
      const handed = new Map<string, Attempt>();
      const jobs: BatchJob<unknown>[] = [];
      for (const member of this.members) {
        const started = member.startInBatch();
        if (!started) continue;
        handed.set(member.job.id, member);
        jobs.push(new BatchJobView(member, started.payload));
      }
      if (jobs.length === 0) return undefined;
      const handler = this.kind.handler as unknown as (jobs: BatchJob<unknown>[], ctx: BatchContext) => unknown;
      try {
        return { handed, returned: handler(jobs, new BatchHandlerContext(this)) };
      } catch (thrown) {
        return { handed, thrown };
      }
    };
    const called = trace ? trace.run(start) : start();
    if (!called) {
      trace?.end('completed');
      return;
    }
    const { handed } = called;
    if ('thrown' in called) {
      this.#failAll(handed, called.thrown, trace);
      return;
    }
    Promise.resolve(called.returned).then(
      (answer) => this.#answer(handed, answer, trace),
      (thrown: unknown) => this.#failAll(handed, thrown, trace),
    );
  }

  /** The handler threw: every job it was given fails with that one error (each by its own attempts). */
  #failAll(handed: Map<string, Attempt>, thrown: unknown, trace: AttemptTrace | undefined): void {
    trace?.end('retry', thrown);
    for (const member of handed.values()) member.fail(thrown);
  }

  /** The handler returned: each job gets its outcome; a job left out is retried. */
  #answer(handed: Map<string, Attempt>, answer: unknown, trace: AttemptTrace | undefined): void {
    trace?.end('completed');
    const answered = new Set<string>();
    if (answer === null || typeof answer !== 'object' || !(Symbol.iterator in answer)) {
      const error = new BatchAnswerError(
        'batch_answer_invalid',
        `the batch handler of ${this.kind.definition.kind} returned ${answer === null ? 'null' : typeof answer}, not a list of its jobs' outcomes (job.done(), job.retry(), …)`,
      );
      for (const member of handed.values()) member.fail(error);
      return;
    }
    for (const outcome of answer as Iterable<BatchOutcome>) {
      const member = issued.has(outcome) ? handed.get(outcome.jobId) : undefined;
      if (!member) {
        this.logger().warn('batch_outcome_ignored', {
          reason: 'not an outcome made by a job of this batch (job.done(), job.retry(), …)',
        });
        continue;
      }
      if (answered.has(outcome.jobId)) {
        member.logger().warn('batch_outcome_ignored', { reason: 'a second outcome for this job: the first one holds' });
        continue;
      }
      answered.add(outcome.jobId);
      settle(member, outcome);
    }
    for (const [id, member] of handed) {
      if (answered.has(id)) continue;
      member.fail(
        new BatchAnswerError(
          'batch_outcome_missing',
          `the batch handler of ${this.kind.definition.kind} returned no outcome for this job`,
        ),
      );
    }
  }

  signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#aborted);
    }
    return this.#controller.signal;
  }

  logger(): Logger {
    const { definition } = this.kind;
    this.#logger ??= withFields(this.#host.settings.logger, {
      invocationId: this.#host.invocationId,
      kind: definition.kind,
      queue: definition.queue,
      batchSize: this.members.length,
    });
    return this.#logger;
  }

  /** Extends every running job's lease in one statement; a job whose lease was lost ends so. */
  async extendLeases(ms: number): Promise<string[]> {
    const { db, schema } = this.#host.settings;
    const running = this.members.filter((m) => !m.end);
    const extended = await extendLeases(
      db.executor,
      schema,
      running.map((m) => m.job),
      ms,
      statementNow(this.#host.settings),
    );
    const kept = new Set(extended);
    for (const member of running) {
      if (!kept.has(member.job.id)) member.abort(new JobAbort('lease_lost', 'the lease was lost to another holder'));
    }
    return extended;
  }
}

/** Ends a job as the handler's outcome for it says. */
function settle(member: Attempt, outcome: BatchOutcome): void {
  switch (outcome.kind) {
    case 'done':
      member.complete(outcome.result);
      return;
    case 'retry': {
      const { error } = outcome;
      // An error class that would end the job another way is recorded, but the answer was "retry".
      const ends = error instanceof DiscardError || error instanceof CancelError;
      member.fail(
        error === undefined
          ? new RetryError('the batch handler asked to retry this job')
          : ends
            ? new RetryError(error.message, { cause: error })
            : error,
      );
      return;
    }
    case 'retry_after':
      member.fail(
        new RetryAfterError(
          outcome.delayMs ?? 0,
          messageOf(outcome.error, 'the batch handler asked to retry this job later'),
          {
            cause: outcome.error,
          },
        ),
      );
      return;
    case 'dead': {
      const { error } = outcome;
      const reason = (outcome as { reason?: string }).reason;
      member.fail(
        error instanceof DiscardError && reason === undefined
          ? error
          : new DiscardError(messageOf(error, 'the batch handler sent this job to the DLQ'), {
              reason: reason ?? 'discarded',
              cause: error,
            }),
      );
      return;
    }
    case 'cancel':
      member.fail(new CancelError(messageOf(outcome.error, 'cancelled by the batch handler')));
      return;
  }
}

function messageOf(error: unknown, fallback: string): string {
  if (error === undefined || error === null) return fallback;
  if (error instanceof Error) return error.message;
  return String(error);
}

function outcome(fields: BatchOutcome & { reason?: string }): BatchOutcome {
  const made = Object.freeze(fields);
  issued.add(made);
  return made;
}

/** One job as the batch handler sees it; the attempt behind it stays out of reach. */
class BatchJobView implements BatchJob<unknown> {
  readonly id: string;
  readonly kind: string;
  readonly queue: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly correlationId: string | null;
  readonly leaseToken: string;
  readonly payload: unknown;
  readonly #member: Attempt;

  constructor(member: Attempt, payload: unknown) {
    const { job } = member;
    this.id = job.id;
    this.kind = job.kind;
    this.queue = job.queue;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.correlationId = job.correlationId;
    this.leaseToken = job.leaseToken;
    this.payload = payload;
    this.#member = member;
  }

  get lastProgress(): unknown {
    return this.#member.lastProgress;
  }

  get logger(): Logger {
    return this.#member.logger();
  }

  reportProgress(progress: unknown): Promise<boolean> {
    return this.#member.reportProgress(progress);
  }

  parents(): Promise<ParentJob[]> {
    return this.#member.parents();
  }

  done(result?: unknown): BatchOutcome {
    return outcome({ jobId: this.id, kind: 'done', result });
  }

  retry(error?: unknown): BatchOutcome {
    return outcome({ jobId: this.id, kind: 'retry', error });
  }

  retryAfter(delayMs: number, error?: unknown): BatchOutcome {
    if (!(Number.isFinite(delayMs) && delayMs >= 0)) {
      throw new SkiplockError('invalid_options', `retryAfter(${delayMs}): the delay must be a number of ms >= 0`);
    }
    return outcome({ jobId: this.id, kind: 'retry_after', delayMs, error });
  }

  dead(error?: unknown, reason?: string): BatchOutcome {
    return outcome({ jobId: this.id, kind: 'dead', error, ...(reason === undefined ? {} : { reason }) });
  }

  cancel(reason?: string): BatchOutcome {
    return outcome({ jobId: this.id, kind: 'cancel', error: reason });
  }
}

/** What the batch handler gets besides its jobs; the batch behind it stays out of reach. */
class BatchHandlerContext implements BatchContext {
  readonly kind: string;
  readonly queue: string;
  readonly #batch: BatchRun;

  constructor(batch: BatchRun) {
    this.kind = batch.kind.definition.kind;
    this.queue = batch.kind.definition.queue;
    this.#batch = batch;
  }

  get signal(): AbortSignal {
    return this.#batch.signal();
  }

  get logger(): Logger {
    return this.#batch.logger();
  }

  extendLeases(ms: number): Promise<string[]> {
    return this.#batch.extendLeases(ms);
  }
}
