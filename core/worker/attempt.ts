import {
  CancelError,
  DestinationError,
  DiscardError,
  OutcomeUnknownError,
  RetryAfterError,
  type StepSuspension,
} from '../../base/errors.js';
import type { DestinationOutcomeOf, Outcome } from '../../base/outcomes.js';
import type { ClaimedJob, ParentJob } from '../../base/rows.js';
import { executorOf } from '../../db/executor-of.js';
import { readParents } from '../../db/statements/jobs-read.js';
import { extendLease, reportProgress, settleJobs } from '../../db/statements/settle.js';
import { toBackoff } from '../backoff.js';
import { countsAgainstDestination } from '../destinations.js';
import { decideFailure } from '../failure.js';
import { check, describeIssues } from '../issues.js';
import { type Logger, withFields } from '../logger.js';
import type { AttemptTrace } from '../tracing.js';
import { JobAbort } from './abort.js';
import type { BatchRun } from './batch.js';
import { type ContextSource, HandlerContext, TransactionalHandlerContext } from './context.js';
import { handlerTransaction, type Kind, statementNow, type WorkerSettings } from './settings.js';
import { StepRunner } from './steps.js';

/** The fields that name a job in every log line. */
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

/** An attempt's outcome, waiting to be written, with what its log line needs. */
export interface PendingOutcome {
  readonly job: ClaimedJob;
  readonly startedAt: number;
  readonly outcome: Outcome;
  /** The error's message, logged with an outcome that is not a completion. */
  readonly reason: string | undefined;
}

/** A job that left the invocation without ending (durable steps): already back in the queue. */
export interface SuspendedEnd {
  readonly suspended: StepSuspension['why'];
  readonly job: ClaimedJob;
  /** When it may run again. */
  readonly runAt: Date;
}

/**
 * How an attempt ended: an outcome to write, `committed` (a transactional attempt completed in
 * its own transaction), `lease_lost` (another holder has the job: nothing to write), or suspended
 * (a continuation, a sleep or a step's retry, written when it happened).
 */
export type AttemptEnd = PendingOutcome | SuspendedEnd | 'committed' | 'lease_lost';

/** What an attempt needs from its invocation. */
export interface AttemptHost {
  readonly settings: WorkerSettings;
  readonly invocationId: string;
  /** When the invocation stops running attempts, on its clock: a step that would end later waits for another. */
  readonly stopAt: number;
  /** The time the invocation had for attempts when it started: a step that needs more never fits one. */
  readonly budgetMs: number;
  /** Told once per attempt, when it ended (possibly from inside run()): the host defers its bookkeeping. */
  ended(attempt: Attempt): void;
}

/**
 * One attempt of one job, from the start of its handler until it ends: by the handler returning
 * or throwing, or by an abort (timeout, invocation deadline, lost lease) — whichever comes first.
 * A handler that ignores its signal cannot hold the invocation: an abort ends the attempt at once
 * and the handler is abandoned. Handlers see it only through a HandlerContext.
 *
 * No promise of our own per attempt: the handler's promise and the abort race through `end`.
 * The AbortController and the job logger are made only when a handler asks for them.
 */
export class Attempt implements ContextSource {
  readonly job: ClaimedJob;
  readonly kind: Kind;
  readonly startedAt: number;
  /** When this attempt times out, on the invocation's clock (the watchdog compares it); steps move it later. */
  timeoutAt: number;
  /** Why it was aborted; set once. */
  aborted: JobAbort | undefined = undefined;
  /** Watched: set by the watchdog. */
  forgotten = false;
  /** How it ended; set once, and then the host is told. */
  end: AttemptEnd | undefined = undefined;
  readonly #host: AttemptHost;
  /** Set while the attempt waits on a promise (the handler's or its transaction's): an abort then ends it. */
  #abortEnds = false;
  #controller: AbortController | undefined = undefined;
  #logger: Logger | undefined = undefined;
  /** The progress last reported: the claim's (an earlier attempt's), then this attempt's. */
  lastProgress: unknown;
  /** Its span (the worker's `tracing`), ended with it. */
  #trace: AttemptTrace | undefined = undefined;
  /** What it threw, for its span. */
  #thrown: unknown = undefined;
  /** Its durable steps, made on the first `ctx.step` or `ctx.sleep`. */
  #steps: StepRunner | undefined = undefined;
  /** The batch it runs in (a batch kind): the batch's handler answers for it, and it holds the slot. */
  readonly batch: BatchRun | undefined;

  /**
   * The attempt failed on a statement whose answer was lost (a step's record, a sleep): that
   * statement may have moved the job already, so its outcome's settle reads back what it finds.
   */
  get failedInDoubt(): boolean {
    return this.#thrown instanceof OutcomeUnknownError;
  }

  /** The worker's breaker settings by destination. */
  get breakers(): WorkerSettings['breakers'] {
    return this.#host.settings.breakers;
  }

  /** `startedAt`: the clock's reading as it starts, when the host has just taken it. */
  constructor(job: ClaimedJob, kind: Kind, host: AttemptHost, batch?: BatchRun, startedAt = host.settings.clock.now()) {
    this.job = job;
    this.kind = kind;
    this.#host = host;
    this.batch = batch;
    this.startedAt = startedAt;
    this.timeoutAt = this.startedAt + kind.definition.timeoutMs;
    this.lastProgress = job.progress ?? null;
  }

  /** Starts the handler. The end is reported to the host, never returned. */
  run(): void {
    this.#trace = this.#host.settings.tracing?.attempt(this.job);
    const { definition, handler } = this.kind;
    const parsed = check(definition.payloadSchema, this.job.payload);
    if (!parsed.success) {
      this.fail(
        new DiscardError(`stored payload does not match the ${this.job.kind} schema: ${describeIssues(parsed.error)}`, {
          reason: 'validation_error',
        }),
      );
      return;
    }
    if (definition.transactional) {
      void this.#runInTransaction(parsed.data);
      return;
    }
    let returned: unknown;
    try {
      const context = new HandlerContext(this);
      returned = this.#trace ? this.#trace.run(() => handler(parsed.data, context)) : handler(parsed.data, context);
    } catch (thrown) {
      this.fail(thrown);
      return;
    }
    if (!isThenable(returned)) {
      this.complete(returned);
      return;
    }
    this.#abortEnds = true;
    // Both callbacks attached: a handler that rejects after we stopped waiting cannot crash the process.
    Promise.resolve(returned).then(
      (value) => this.complete(value),
      (thrown: unknown) => this.fail(thrown),
    );
  }

  /**
   * Starts this job as a member of its batch: its span, and its payload checked against the kind's
   * schema. A payload that fails it ends the attempt at once (dead, validation_error, as a single
   * job's would) and undefined is returned: the job is not handed to the batch's handler. Otherwise
   * the parsed payload; from now on an abort ends the attempt, and the batch's answer settles it.
   */
  startInBatch(): { payload: unknown } | undefined {
    this.#trace = this.#host.settings.tracing?.attempt(this.job);
    const parsed = check(this.kind.definition.payloadSchema, this.job.payload);
    if (!parsed.success) {
      this.fail(
        new DiscardError(`stored payload does not match the ${this.job.kind} schema: ${describeIssues(parsed.error)}`, {
          reason: 'validation_error',
        }),
      );
      return undefined;
    }
    this.#abortEnds = true;
    if (this.aborted) {
      this.fail(this.aborted);
      return undefined;
    }
    return { payload: parsed.data };
  }

  /** The opt-in transactional mode: the handler's writes commit with the job's completion. */
  async #runInTransaction(payload: unknown): Promise<void> {
    this.#abortEnds = true;
    const { schema, completion } = this.#host.settings;
    const { id, leaseToken } = this.job;
    // createWorker refused a transactional kind without a way to make its transaction.
    const transaction = handlerTransaction(this.#host.settings) as NonNullable<ReturnType<typeof handlerTransaction>>;
    try {
      await transaction(async (tx) => {
        const context = new TransactionalHandlerContext(this, tx);
        const value = await (this.#trace
          ? this.#trace.run(() => this.kind.handler(payload, context))
          : this.kind.handler(payload, context));
        if (this.aborted) throw this.aborted;
        const result = resultOf(value, this.#host.settings.maxResultBytes);
        if (result instanceof ResultError) throw result;
        const done: Outcome = {
          id,
          leaseToken,
          outcome: 'completed',
          ...(result === undefined ? {} : { result }),
          ...destinationOf(this, undefined),
        };
        const settled = await settleJobs(executorOf(tx), schema, [done], statementNow(this.#host.settings), completion);
        if (settled.length === 0) throw new JobAbort('lease_lost', 'the lease was lost before commit');
      });
    } catch (thrown) {
      this.fail(thrown);
      return;
    }
    this.#finish('committed');
  }

  /** Ends the attempt (if it is still running) and fires its signal. */
  abort(reason: JobAbort): void {
    if (this.aborted) return;
    this.aborted = reason;
    this.#controller?.abort(reason);
    if (this.#abortEnds) this.fail(reason);
  }

  /**
   * The handler returned `value`: the job completed with it as its result, unless the attempt was
   * aborted meanwhile, or the result cannot be stored (then the job goes to the DLQ: its work is
   * done, and running it again would not shrink its result).
   */
  complete(value?: unknown): void {
    if (this.aborted) {
      this.fail(this.aborted);
      return;
    }
    const result = resultOf(value, this.#host.settings.maxResultBytes);
    if (result instanceof ResultError) {
      this.fail(result);
      return;
    }
    const { job } = this;
    const outcome: Outcome = { id: job.id, leaseToken: job.leaseToken, outcome: 'completed' };
    // Each field only when there is one, as keyOf and destinationOf give them (no object per field).
    if (result !== undefined) outcome.result = result;
    if (job.orderingKey) outcome.orderingKey = job.orderingKey;
    if (job.destination) {
      const { destination } = destinationOf(this, undefined);
      if (destination) outcome.destination = destination;
    }
    this.#finish({ job, startedAt: this.startedAt, outcome, reason: undefined });
  }

  /** The handler threw (or the attempt was aborted): a lost lease, or a failure to write. */
  fail(thrown: unknown): void {
    if (this.end) return;
    this.#thrown = thrown;
    if (thrown instanceof JobAbort && thrown.reason === 'lease_lost') this.#finish('lease_lost');
    else this.#finish(failureOutcome(this, thrown));
  }

  #finish(end: AttemptEnd): void {
    if (this.end) return;
    this.end = end;
    if (this.#trace) {
      const outcome =
        typeof end === 'string'
          ? end === 'committed'
            ? 'completed'
            : end
          : 'suspended' in end
            ? 'suspended'
            : end.outcome.outcome;
      this.#trace.end(outcome, outcome === 'completed' ? undefined : this.#thrown);
    }
    this.#host.ended(this);
  }

  /** Moves the attempt's timeout later (a step starts that may run until `at`). */
  extendTimeout(at: number): void {
    if (at > this.timeoutAt) this.timeoutAt = at;
  }

  steps(): StepRunner {
    if (!this.#steps) {
      const host = this.#host;
      this.#steps = new StepRunner({
        attempt: this,
        settings: host.settings,
        stopAt: host.stopAt,
        budgetMs: host.budgetMs,
        suspended: (why, runAt) => {
          this.#finish({ suspended: why, job: this.job, runAt });
        },
        traced: (step, fn) => (this.#trace?.step ? this.#trace.step(step, fn) : fn()),
      });
    }
    return this.#steps;
  }

  signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.aborted) this.#controller.abort(this.aborted);
    }
    return this.#controller.signal;
  }

  logger(): Logger {
    this.#logger ??= withFields(this.#host.settings.logger, jobFields(this.job, this.#host.invocationId));
    return this.#logger;
  }

  async reportProgress(progress: unknown): Promise<boolean> {
    const { db, schema } = this.#host.settings;
    const ok = this.#fenced(
      await reportProgress(db.executor, schema, this.job, progress, statementNow(this.#host.settings)),
    );
    if (ok) this.lastProgress = progress ?? null;
    return ok;
  }

  parents(): Promise<ParentJob[]> {
    const { db, schema } = this.#host.settings;
    return readParents(db.executor, schema, this.job.id);
  }

  async extendLease(ms: number): Promise<boolean> {
    const { db, schema } = this.#host.settings;
    return this.#fenced(
      (await extendLease(db.executor, schema, this.job, ms, statementNow(this.#host.settings))) !== null,
    );
  }

  /** A fenced write that found nothing: another holder has the job, so this attempt is over. */
  #fenced(ok: boolean): boolean {
    if (!ok) this.abort(new JobAbort('lease_lost', 'the lease was lost to another holder'));
    return ok;
  }
}

/** A result that cannot be stored: not JSON, or larger than maxResultBytes. */
export class ResultError extends Error {
  readonly class: 'result_not_json' | 'result_too_large';
  constructor(cls: ResultError['class'], message: string) {
    super(message);
    this.name = 'ResultError';
    this.class = cls;
  }
}

/** A handler's return value as JSON text for the completion, undefined for none, or why it cannot be stored. */
export function resultOf(value: unknown, maxBytes: number): string | undefined | ResultError {
  if (value === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    return new ResultError('result_not_json', `the handler's result is not JSON: ${(err as Error).message}`);
  }
  if (text === undefined) return undefined; // a function or a symbol: nothing to store
  const bytes = text.length > maxBytes / 3 ? Buffer.byteLength(text) : text.length;
  if (bytes > maxBytes) {
    return new ResultError(
      'result_too_large',
      `the handler's result is ${bytes} bytes of JSON, more than maxResultBytes (${maxBytes})`,
    );
  }
  return text;
}

/** What to write for a failed attempt: a retry after the backoff, the DLQ, or a cancellation. */
function failureOutcome(attempt: Attempt, thrown: unknown): PendingOutcome {
  const { job, startedAt } = attempt;
  if (thrown instanceof ResultError) {
    const error = { class: thrown.class, message: thrown.message, attempt: job.attempt };
    const base = { id: job.id, leaseToken: job.leaseToken, ...keyOf(job), ...destinationOf(attempt, undefined) };
    return {
      job,
      startedAt,
      reason: thrown.message,
      outcome: { ...base, outcome: 'dead', reason: 'invalid_result', error },
    };
  }
  const decision = decideFailure(thrown, job.attempt);
  const base = { id: job.id, leaseToken: job.leaseToken, ...keyOf(job), ...destinationOf(attempt, thrown) };
  const reason = decision.error.message;
  if (decision.outcome === 'retry') {
    let delayMs: number;
    try {
      delayMs = decision.delayMs ?? attempt.kind.definition.backoff(job.attempt, thrown);
    } catch {
      delayMs = FALLBACK_BACKOFF(job.attempt, thrown); // a custom backoff that throws
    }
    // An aborted handler may still be running (it was abandoned, not stopped): its retry must not
    // start before this attempt's lease ends — decided by the database, whose clock the lease is on.
    const afterLease = thrown instanceof JobAbort;
    return {
      job,
      startedAt,
      reason,
      outcome: { ...base, outcome: 'retry', delayMs, afterLease, error: decision.error },
    };
  }
  if (decision.outcome === 'dead') {
    return {
      job,
      startedAt,
      reason,
      outcome: { ...base, outcome: 'dead', reason: decision.reason, error: decision.error },
    };
  }
  return { job, startedAt, reason, outcome: { ...base, outcome: 'cancelled', error: decision.error } };
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

const FALLBACK_BACKOFF = toBackoff(undefined);

/**
 * What the attempt did to its destination (`thrown`: what the handler threw, undefined when it
 * returned), as an outcome field: nothing for a job without one, a cancellation, or an attempt the
 * invocation's own deadline cut short (not the destination's doing; a probe cut short is replaced
 * once its lease has run out).
 */
function destinationOf(attempt: Attempt, thrown: unknown): { destination?: DestinationOutcomeOf } {
  const { breaker } = attempt.kind.definition;
  if (thrown instanceof CancelError) return {};
  if (thrown instanceof JobAbort && thrown.reason !== 'timeout') return {};
  const name = (thrown instanceof DestinationError ? thrown.destination : undefined) ?? attempt.job.destination;
  if (!name) return {};
  const override = attempt.breakers.get(name);
  const s = override ? { ...breaker, ...override } : breaker;
  const failed = thrown !== undefined && countsAgainstDestination(thrown, thrown instanceof JobAbort);
  return {
    destination: {
      name,
      failed,
      deferMs: thrown instanceof RetryAfterError && s.retryAfterDefersDestination ? thrown.delayMs : null,
      breaker: {
        failures: s.failures,
        failureRate: s.failureRate,
        windowMs: s.windowMs,
        coolDownMs: s.coolDownMs,
        maxCoolDownMs: s.maxCoolDownMs,
      },
    },
  };
}

/** The job's ordering key as an outcome field, when it has one. */
function keyOf(job: ClaimedJob): { orderingKey?: string } {
  return job.orderingKey ? { orderingKey: job.orderingKey } : {};
}
