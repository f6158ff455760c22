import { ConfigError, InvocationDeadlineError } from '../../base/errors.js';
import type { Clock } from '../clock.js';
import type { JobDefinition } from '../jobs.js';
import { JobAbort } from './abort.js';
import type { Kind } from './settings.js';

/**
 * What an invocation spends before its first job can start — the sweep, the schedules' tick, the
 * claim's round trip — taken from its budget when deciding whether a kind can ever run in it. A kind
 * whose timeout fits only to the millisecond never runs in practice (on Lambda the time left at the
 * start is always a little below the function's timeout): it is reported as never fitting instead of
 * being silently skipped at every claim.
 */
export const START_ALLOWANCE_MS = 500;

/**
 * The invocation's time budget, on its own clock. Only the budget is measured here; every job
 * timestamp (run_at, leases, deadlines) is compared in the database.
 */
export class Deadline {
  /** When the platform ends the function. */
  readonly at: number;
  /** No claim, and no attempt running, past this point: the time left is for writing outcomes. */
  readonly stopClaimingAt: number;
  /**
   * Every statement is waited for until just before the deadline, not for its statement or query
   * timeout (seconds): the function must return, with its summary, before the platform kills it.
   */
  readonly answerBy: number;
  readonly #clock: Clock;

  constructor(clock: Clock, remainingMs: number, safetyMarginMs: number) {
    this.#clock = clock;
    this.at = clock.now() + Math.max(0, remainingMs);
    this.stopClaimingAt = this.at - safetyMarginMs;
    this.answerBy = this.at - Math.min(100, safetyMarginMs);
  }

  /** Whether an attempt of `kind` can run in this invocation at all (at its start, less the start allowance). */
  fitsAtAll(kind: Kind, startedAt: number): boolean {
    return startedAt + START_ALLOWANCE_MS + kind.definition.timeoutMs <= this.stopClaimingAt;
  }

  /**
   * Whether an attempt of `kind` started now (or `laterMs` from now) would end before claiming stops.
   * `now`: the clock's reading, when the caller has just taken it.
   */
  fits(kind: Kind, laterMs = 0, now = this.#clock.now()): boolean {
    return now + laterMs + kind.definition.timeoutMs <= this.stopClaimingAt;
  }

  /** `statement`, or an InvocationDeadlineError at answerBy (the statement goes on, unwatched). */
  inTime<T>(statement: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const cancel = this.#clock.setTimer(
        () => reject(new InvocationDeadlineError()),
        this.answerBy - this.#clock.now(),
      );
      statement.then(
        (value) => {
          cancel();
          resolve(value);
        },
        (error: unknown) => {
          cancel();
          reject(error);
        },
      );
    });
  }
}

/** What the watchdog aborts: one attempt, or a batch (whose jobs share one timeout). */
export interface Watched {
  readonly startedAt: number;
  readonly timeoutAt: number;
  readonly kind: Kind;
  /** Set by the watchdog: forgotten, and dropped from its list at its next compaction. */
  forgotten: boolean;
  abort(reason: JobAbort): void;
}

/**
 * One timer for the whole invocation, not one per attempt: it fires at the earliest timeout
 * among the running attempts (or when claiming stops) and aborts whatever is due.
 */
export class Watchdog {
  readonly #clock: Clock;
  readonly #deadline: Deadline;
  /**
   * In the order they started (the order #fire aborts them in). Forgotten ones are marked and
   * dropped in one pass once they are half the list: a Set's add and delete per attempt cost more.
   */
  readonly #running: Watched[] = [];
  #forgotten = 0;
  #at = Number.POSITIVE_INFINITY;
  #cancel: (() => void) | undefined = undefined;

  constructor(clock: Clock, deadline: Deadline) {
    this.#clock = clock;
    this.#deadline = deadline;
  }

  watch(attempt: Watched): void {
    attempt.forgotten = false;
    this.#running.push(attempt);
    this.#arm(Math.min(attempt.timeoutAt, this.#deadline.stopClaimingAt));
  }

  forget(attempt: Watched): void {
    if (attempt.forgotten) return;
    attempt.forgotten = true;
    if (++this.#forgotten * 2 > this.#running.length) this.#compact();
  }

  /** The attempts (and batches) running now. */
  get running(): readonly Watched[] {
    if (this.#forgotten > 0) this.#compact();
    return this.#running;
  }

  #compact(): void {
    const running = this.#running;
    let kept = 0;
    for (const attempt of running) if (!attempt.forgotten) running[kept++] = attempt;
    running.length = kept;
    this.#forgotten = 0;
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #arm(at: number): void {
    if (at >= this.#at) return;
    this.#cancel?.();
    this.#at = at;
    this.#cancel = this.#clock.setTimer(this.#fire, at - this.#clock.now());
  }

  readonly #fire = (): void => {
    this.#at = Number.POSITIVE_INFINITY;
    this.#cancel = undefined;
    const now = this.#clock.now();
    const { stopClaimingAt } = this.#deadline;
    let next = Number.POSITIVE_INFINITY;
    for (const attempt of this.running) {
      if (attempt.timeoutAt <= now) {
        attempt.abort(new JobAbort('timeout', `timed out after ${attempt.kind.definition.timeoutMs} ms`));
      } else if (stopClaimingAt <= now) {
        attempt.abort(new JobAbort('invocation_deadline', 'the invocation reached its deadline'));
      } else {
        next = Math.min(next, attempt.timeoutAt, stopClaimingAt);
      }
    }
    if (next < Number.POSITIVE_INFINITY) this.#arm(next);
  };
}

/**
 * Refuses kinds that would never run: those whose timeoutMs is longer than what invocations of
 * `invocationMs` leave for attempts once `safetyMarginMs` and START_ALLOWANCE_MS are set aside
 * (Deadline.fitsAtAll). Only the kinds whose own queue the worker serves (`queues`, undefined: all) are
 * its concern: a kind defined on another queue is run by another worker — and so is a kind of one of
 * its `slowQueues`, which a worker with a longer budget serves.
 */
export function assertKindsFit(
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  definitions: Iterable<JobDefinition<any, any>>,
  budget: {
    invocationMs: number;
    safetyMarginMs: number;
    queues: readonly string[] | undefined;
    slowQueues?: readonly string[] | undefined;
  },
): void {
  const { invocationMs, safetyMarginMs, queues, slowQueues } = budget;
  const leftMs = invocationMs - safetyMarginMs - START_ALLOWANCE_MS;
  const unfit = [...definitions].filter(
    (d) => d.timeoutMs > leftMs && (queues === undefined || queues.includes(d.queue)) && !slowQueues?.includes(d.queue),
  );
  if (unfit.length === 0) return;
  const named = unfit.map((d) => `${d.kind} (timeoutMs ${d.timeoutMs})`).join(', ');
  throw new ConfigError(
    `job kind${unfit.length > 1 ? 's' : ''} ${named} never fit${unfit.length > 1 ? '' : 's'} this worker's invocations: ${invocationMs} ms less safetyMarginMs ${safetyMarginMs} and ${START_ALLOWANCE_MS} ms to start leaves ${leftMs} ms; raise the function's timeout or lower the kind's timeoutMs`,
  );
}
