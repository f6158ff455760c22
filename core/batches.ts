import { ConfigError } from '../base/errors.js';
import type { ParentJob } from '../base/rows.js';
import type { PayloadOutput, PayloadSchema } from './issues.js';
import { buildDefinition, type JobDefinition, type JobKindOptions } from './jobs.js';
import type { Logger } from './logger.js';

/** The most jobs one batch handler call takes. */
export const MAX_BATCH_SIZE = 1_000;
/** The longest a batch waits to fill before it starts. */
export const MAX_BATCH_WAIT_MS = 10_000;

/** What one handler call takes: how many jobs at most, and how long it may wait to fill. */
export interface BatchOptions {
  /** Up to this many claimed jobs of the kind per handler call, 1..1000. */
  size: number;
  /**
   * When fewer than `size` jobs came with the claim, claim again for up to this long before the
   * batch starts (never past the invocation's budget nor the first jobs' lease grace). 0..10000.
   * @defaultValue 0 (start with what the claim brought)
   */
  maxWaitMs?: number;
}

/**
 * A job's answer in a batch, made by the job's own `done`, `retry`, `retryAfter`, `dead` or
 * `cancel`. Opaque: return it from the handler.
 */
export interface BatchOutcome {
  readonly jobId: string;
  readonly kind: 'done' | 'retry' | 'retry_after' | 'dead' | 'cancel';
  /** done: the result stored for the job. */
  readonly result?: unknown;
  /** retry, retry_after, dead, cancel: the error recorded with the job. */
  readonly error?: unknown;
  /** retry_after: the delay before its next attempt. */
  readonly delayMs?: number;
}

/** One job of a batch, as the handler sees it: its metadata, its payload, and its answers. */
export interface BatchJob<P> {
  readonly id: string;
  readonly kind: string;
  readonly queue: string;
  /** 1 on the first attempt of this job (each job of a batch counts its own). */
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly correlationId: string | null;
  /** This attempt's lease token (a fencing token for external systems). */
  readonly leaseToken: string;
  /** The payload, validated by the kind's schema (a job whose payload fails it never gets here). */
  readonly payload: P;
  /** The progress last reported for this job, by an earlier attempt or this one, or null. */
  readonly lastProgress: unknown;
  /** A logger whose lines name this job. */
  readonly logger: Logger;
  /** Records this job's progress. Fenced: false when this job's lease was lost (its answer is then ignored). */
  reportProgress(progress: unknown): Promise<boolean>;
  /** The jobs this one waited for (enqueue `after`). */
  parents(): Promise<ParentJob[]>;
  /** Completed, with `result` stored as its result (JSON, up to the worker's maxResultBytes). */
  done(result?: unknown): BatchOutcome;
  /** Retried with the kind's backoff (or dead when out of attempts); `error` is recorded. */
  retry(error?: unknown): BatchOutcome;
  /** Retried after `delayMs` (e.g. the bulk API's Retry-After for this item). */
  retryAfter(delayMs: number, error?: unknown): BatchOutcome;
  /** Straight to the DLQ, no retries; `reason` classifies it there. @defaultValue reason 'discarded' */
  dead(error?: unknown, reason?: string): BatchOutcome;
  /** Ends `cancelled`. */
  cancel(reason?: string): BatchOutcome;
}

/** What a batch handler gets besides its jobs. */
export interface BatchContext {
  readonly kind: string;
  readonly queue: string;
  /** Fires at the kind's timeout (counted from the batch's start) or at the invocation's deadline. */
  readonly signal: AbortSignal;
  /** A logger whose lines name the batch's kind and size. */
  readonly logger: Logger;
  /**
   * Pushes the lease of every job of the batch that is still running to at least `ms` from now, in
   * one statement. Returns the ids whose lease was extended; a job missing from it lost its lease
   * (its answer will be ignored).
   */
  extendLeases(ms: number): Promise<string[]>;
}

/**
 * A batch handler: up to `batch.size` jobs of the kind, returning one outcome per job (in any
 * order). A job left out of the answer is retried with a `batch_outcome_missing` error; a throw
 * fails every job of the batch with that error (each by its own attempts and backoff).
 */
export type BatchHandler<P> = (
  jobs: BatchJob<P>[],
  context: BatchContext,
) => readonly BatchOutcome[] | Promise<readonly BatchOutcome[]>;

/** A batch kind's settings, as the worker reads them from its definition. */
export interface BatchSpec {
  readonly size: number;
  readonly maxWaitMs: number;
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  readonly handler: BatchHandler<any> | undefined;
}

/**
 * The options of a batch kind: those of defineJob, less what cannot hold per job in a batch —
 * `transactional` (one transaction would commit every job's completion together), durable steps
 * (`maxSteps`: a step, a sleep or a continuation moves one job, not the batch) and ordering
 * (`orderingKey`, `orderingOnDead`: a batch runs jobs of many keys at once). Each is refused with
 * a ConfigError when given anyway (from JavaScript, or through a cast).
 */
export interface BatchJobKindOptions<S extends PayloadSchema>
  extends Omit<
    JobKindOptions<S, false>,
    'handler' | 'transactional' | 'maxSteps' | 'orderingKey' | 'orderingOnDead' | 'batch'
  > {
  /** How many jobs one call takes, and how long a batch may wait to fill. */
  batch: BatchOptions;
  /** The batch handler; may also be given later to the worker (`handlers`). */
  handler?: BatchHandler<PayloadOutput<S>>;
}

/** A batch kind: a JobDefinition whose `batch` says how its jobs are grouped. */
export interface BatchJobDefinition<S extends PayloadSchema = PayloadSchema> extends JobDefinition<S, false> {
  readonly batch: BatchSpec;
}

/** What cannot hold per job in a batch, and why: refused when the kind is defined. */
const REFUSED: Record<string, string> = {
  transactional:
    "a batch cannot be transactional: one transaction would commit every job's completion together, so a job's own outcome could not hold",
  maxSteps:
    'a batch kind has no durable steps (maxSteps): a step, a sleep or a continuation moves one job out of the invocation, and the others of its batch cannot follow it',
  orderingKey:
    'a batch kind cannot have an ordering key: a batch runs jobs of many keys at once, so per-key order cannot hold across it',
  orderingOnDead:
    'a batch kind cannot have orderingOnDead: it has no ordering key (per-key order cannot hold across a batch)',
};

/**
 * Defines a kind whose handler takes a batch: up to `batch.size` claimed jobs per call, each
 * answered on its own (done, retry, retry after a time, dead, cancelled). Leases, dedupe, results,
 * retries and the DLQ stay per job. One batch takes one of the worker's concurrency slots.
 */
export function defineBatchJob<S extends PayloadSchema>(options: BatchJobKindOptions<S>): BatchJobDefinition<S> {
  const given = options as BatchJobKindOptions<S> & Record<string, unknown>;
  const kind = typeof options.kind === 'string' ? options.kind : String(options.kind);
  for (const [option, why] of Object.entries(REFUSED)) {
    if (given[option] !== undefined && given[option] !== false) {
      throw new ConfigError(`${kind}: batch + ${option}: ${why}`);
    }
  }
  const batch = batchSpec(kind, options.batch, options.handler);
  const { handler: _handler, batch: _batch, ...single } = options;
  return buildDefinition({ ...single, transactional: false }, batch) as BatchJobDefinition<S>;
}

function batchSpec(kind: string, options: unknown, handler: unknown): BatchSpec {
  if (options === null || typeof options !== 'object') {
    throw new ConfigError(`${kind}: batch must be an object: { size, maxWaitMs? }`);
  }
  const { size, maxWaitMs = 0 } = options as BatchOptions;
  if (!Number.isInteger(size) || size < 1 || size > MAX_BATCH_SIZE) {
    throw new ConfigError(`${kind}: batch.size must be an integer from 1 to ${MAX_BATCH_SIZE}`);
  }
  if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0 || maxWaitMs > MAX_BATCH_WAIT_MS) {
    throw new ConfigError(`${kind}: batch.maxWaitMs must be an integer from 0 to ${MAX_BATCH_WAIT_MS}`);
  }
  if (handler !== undefined && typeof handler !== 'function') {
    throw new ConfigError(`${kind}: handler must be a function`);
  }
  return { size, maxWaitMs, handler: handler as BatchHandler<unknown> | undefined };
}
