import { StepError } from '../../base/errors.js';
import type { ParentJob } from '../../base/rows.js';
import type { AnyPgDatabase } from '../../db/connect.js';
import type { JobContext, StepOptions, TransactionalJobContext, TransactionalStepOptions } from '../jobs.js';
import type { Logger } from '../logger.js';
import type { SignalWaitResult, StepRunner } from './steps.js';

/** What a handler's context reads from the attempt behind it; the attempt itself stays out of reach. */
export interface ContextSource {
  readonly job: Pick<JobContext, 'id' | 'kind' | 'queue' | 'attempt' | 'maxAttempts' | 'correlationId' | 'leaseToken'>;
  signal(): AbortSignal;
  logger(): Logger;
  reportProgress(progress: unknown): Promise<boolean>;
  extendLease(ms: number): Promise<boolean>;
  parents(): Promise<ParentJob[]>;
  readonly lastProgress: unknown;
  steps(): StepRunner;
}

/**
 * What a handler gets besides its payload: JobContext's members and nothing else. The attempt
 * behind it is a #private field, so a handler cannot abort an attempt (its own or another) or
 * reach the loop through it. The signal and the logger are getters on the prototype: a short job
 * that never asks pays for neither an AbortController nor a child logger, and the context costs
 * one object per attempt.
 */
export class HandlerContext implements JobContext {
  readonly id: string;
  readonly kind: string;
  readonly queue: string;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly correlationId: string | null;
  readonly leaseToken: string;
  readonly #source: ContextSource;

  constructor(source: ContextSource) {
    const { job } = source;
    this.id = job.id;
    this.kind = job.kind;
    this.queue = job.queue;
    this.attempt = job.attempt;
    this.maxAttempts = job.maxAttempts;
    this.correlationId = job.correlationId;
    this.leaseToken = job.leaseToken;
    this.#source = source;
  }

  get signal(): AbortSignal {
    return this.#source.signal();
  }

  get logger(): Logger {
    return this.#source.logger();
  }

  get lastProgress(): unknown {
    return this.#source.lastProgress;
  }

  reportProgress(progress: unknown): Promise<boolean> {
    return this.#source.reportProgress(progress);
  }

  extendLease(ms: number): Promise<boolean> {
    return this.#source.extendLease(ms);
  }

  parents(): Promise<ParentJob[]> {
    return this.#source.parents();
  }

  step<T>(name: string, fn: () => T, options?: StepOptions): Promise<Awaited<T>>;
  step<T>(name: string, options: TransactionalStepOptions, fn: (tx: AnyPgDatabase) => Promise<T>): Promise<T>;
  step(
    name: string,
    second: (() => unknown) | TransactionalStepOptions,
    third?: StepOptions | ((tx: AnyPgDatabase) => Promise<unknown>),
  ): Promise<unknown> {
    if (typeof second === 'function') {
      return this.#source.steps().run(name, (third as StepOptions | undefined) ?? {}, second);
    }
    if (typeof third !== 'function') {
      return Promise.reject(
        new StepError('invalid_step', `step "${name}": give the step's function after its options`),
      );
    }
    return this.#source.steps().run(name, second ?? {}, third as (tx?: AnyPgDatabase) => unknown);
  }

  sleep(name: string, ms: number): Promise<void> {
    return this.#source.steps().sleep(name, { delayMs: ms });
  }

  sleepUntil(name: string, at: Date): Promise<void> {
    return this.#source.steps().sleep(name, { wakeAt: at });
  }

  waitForSignal<T = unknown>(name: string, options: { key: string; timeoutMs: number }): Promise<SignalWaitResult<T>> {
    return this.#source.steps().waitForSignal(name, options) as Promise<SignalWaitResult<T>>;
  }
}

/** The transactional mode's context: the same members, plus the transaction the completion commits in. */
export class TransactionalHandlerContext extends HandlerContext implements TransactionalJobContext {
  readonly tx: AnyPgDatabase;

  constructor(source: ContextSource, tx: AnyPgDatabase) {
    super(source);
    this.tx = tx;
  }
}
