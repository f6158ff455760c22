import { DatabaseError, SkiplockError } from '../../base/errors.js';
import type { BreakerMove, BreakerState, SettleReport } from '../../base/outcomes.js';
import type { ClaimDeadJob, ClaimedJob } from '../../base/rows.js';
import { scrubSecrets } from '../../base/scrub-secrets.js';
import type { MeteredOutcome } from '../metrics.js';
import { jobFields, type PendingOutcome, type SuspendedEnd } from './attempt.js';
import type { WorkerSettings } from './settings.js';

export interface InvocationInput {
  /** Milliseconds this invocation may run (Lambda's getRemainingTimeInMillis(), Vercel's maxDuration). */
  remainingMs: number;
  /** Identifies the invocation in locked_by and logs. @defaultValue a random UUID */
  invocationId?: string;
}

export interface InvocationSummary {
  invocationId: string;
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  cancelled: number;
  released: number;
  leaseLost: number;
  durationMs: number;
  /**
   * drained: no runnable work left; deadline: out of time; batch_done: drain off, the one batch
   * ran; saturated: maxInvocations invocations of this worker already run (nothing was claimed);
   * no_kind_fits: none of the worker's kinds has a timeoutMs that fits this invocation's budget
   * (nothing was claimed; `unfit` names them); error: a statement failed.
   */
  stoppedBecause: 'drained' | 'deadline' | 'batch_done' | 'saturated' | 'no_kind_fits' | 'error';
  /**
   * The kinds whose timeoutMs is longer than the time this invocation had for attempts (`budgetMs`:
   * the time it had left as it started, less safetyMarginMs): it never claims them. Raise the
   * function's timeout or lower the kind's timeoutMs. Absent when every kind fits.
   */
  unfit?: { budgetMs: number; kinds: { kind: string; timeoutMs: number }[] };
  /** With maxInvocations: invocations this one asked the platform to start (fan-out). */
  invocationsStarted?: number;
  error?: string;
  /** With stoppedBecause 'error': the SQLSTATE when the database sent one, else the error code. */
  errorCode?: string;
  /**
   * Jobs that left this invocation to go on in a later one without ending (durable steps: a
   * continuation when the next step would not fit the time left, a sleep, a wait for a signal);
   * absent when none did.
   */
  suspended?: number;
  /** Occurrences of schedules this invocation's tick enqueued (absent when it did not tick). */
  scheduled?: number;
  /** Occurrences of run-time schedules this invocation's tick enqueued (absent when none was due). */
  runtimeScheduled?: number;
  /** Time spent waiting for a rate limit's next token (absent when it never waited). */
  rateWaitMs?: number;
  /**
   * Statements whose answer was lost (the connection failed after they were sent: they may have
   * committed). Outcomes they carried were sent again and the ones written earlier read back, so
   * the counts above say what committed; jobs a lost claim took were given back. Absent when none.
   */
  answersLost?: number;
  /**
   * With the worker's `nextDue`, on an invocation that claimed nothing and ran dry: when this worker
   * next has something to do, in epoch ms (in the past or now: due already, e.g. work a limit or a
   * pause holds back), or null when nothing is due until something is enqueued. Absent when the
   * invocation did work, did not ask, or could not read it: the platform keeps its usual tick.
   */
  nextDueAt?: number | null;
  /** Circuit breakers this invocation's outcomes and claims moved, in order (absent when none). */
  breakers?: { destination: string; from: BreakerState; to: BreakerState }[];
}

/** The invocation's summary, and the log line behind each count in it. */
export class Ledger {
  readonly summary: InvocationSummary;
  readonly #settings: WorkerSettings;
  readonly #startedAt: number;

  constructor(settings: WorkerSettings, invocationId: string) {
    this.#settings = settings;
    this.#startedAt = settings.clock.now();
    this.summary = {
      invocationId,
      claimed: 0,
      completed: 0,
      retried: 0,
      dead: 0,
      cancelled: 0,
      released: 0,
      leaseLost: 0,
      durationMs: 0,
      stoppedBecause: 'drained',
    };
  }

  /** A row no claim may run, moved to the DLQ before the first claim. */
  buried(job: ClaimDeadJob): void {
    this.summary.dead++;
    this.#settings.logger.warn('job', {
      ...jobFields(job, this.summary.invocationId),
      outcome: 'dead',
      reason: job.reason,
    });
  }

  /**
   * The loop waits `waitMs` for a rate's next token: logged `rate_limited` (info) the first time in
   * an invocation, then at debug (it happens every period while a backlog runs at its rate).
   */
  rateWait(waitMs: number): void {
    this.#settings.metrics?.rateWaited(waitMs);
    const first = this.summary.rateWaitMs === undefined;
    this.summary.rateWaitMs = (this.summary.rateWaitMs ?? 0) + waitMs;
    const fields = { invocationId: this.summary.invocationId, waitMs };
    if (first) this.#settings.logger.info('rate_limited', fields);
    else this.#settings.logger.debug('rate_wait', fields);
  }

  /** A statement's answer was lost (OutcomeUnknownError): counted, and said once per statement. */
  answerLost(statement: 'claim' | 'settle'): void {
    this.summary.answersLost = (this.summary.answersLost ?? 0) + 1;
    this.#settings.logger.warn('answer_lost', { invocationId: this.summary.invocationId, statement });
  }

  /** Outcomes a statement with a lost answer had written, found by reading them back. */
  confirmed(count: number): void {
    if (count > 0) this.#settings.logger.info('outcomes_confirmed', { invocationId: this.summary.invocationId, count });
  }

  claimed(count: number): void {
    this.summary.claimed += count;
  }

  /** Jobs given back unstarted: `released` of the `given` were still ours (the rest had lost their lease). */
  released(given: number, released: string[]): void {
    this.summary.released += released.length;
    this.summary.leaseLost += given - released.length;
    this.#settings.logger.info('released', { invocationId: this.summary.invocationId, jobIds: released });
  }

  /** A transactional attempt that completed in its own transaction. */
  committed(job: ClaimedJob, startedAt?: number): void {
    this.summary.completed++;
    this.#measure(job, 'completed', startedAt);
    if (this.#settings.infoLogs) {
      this.#settings.logger.info('job', { ...jobFields(job, this.summary.invocationId), outcome: 'completed' });
    }
  }

  /** A job that left the invocation without ending (durable steps); a step's retry counts as retried. */
  suspended(end: SuspendedEnd, startedAt: number): void {
    const { summary } = this;
    this.#measure(end.job, end.suspended === 'retrying' ? 'retry' : 'suspended', startedAt);
    if (end.suspended === 'retrying') summary.retried++;
    else summary.suspended = (summary.suspended ?? 0) + 1;
    if (!this.#settings.infoLogs) return;
    this.#settings.logger.info('job', {
      ...jobFields(end.job, summary.invocationId),
      outcome: end.suspended === 'retrying' ? 'retry' : end.suspended,
      durationMs: this.#settings.clock.now() - startedAt,
      nextRunAt: end.runAt.toISOString(),
    });
  }

  /** An attempt that found out, before writing, that another holder has its job. */
  leaseLost(job: ClaimedJob, startedAt?: number): void {
    this.summary.leaseLost++;
    this.#measure(job, 'lease_lost', startedAt);
    this.#settings.logger.warn('lease_lost', { ...jobFields(job, this.summary.invocationId), outcome: 'lease_lost' });
  }

  /**
   * A breaker changed state: a log line (a warning when it opens) and the summary, whose metrics
   * line counts them. `probeJobId`: the job this claim sent through as the half-open probe.
   */
  breaker(move: BreakerMove | { destination: string; from: BreakerState; to: 'half_open'; probeJobId: string }): void {
    const { summary } = this;
    summary.breakers = [...(summary.breakers ?? []), { destination: move.destination, from: move.from, to: move.to }];
    this.#settings.metrics?.breakerMoved(move.destination, move.from, move.to);
    const fields = {
      invocationId: summary.invocationId,
      destination: move.destination,
      from: move.from,
      to: move.to,
      ...('probeJobId' in move
        ? { probeJobId: move.probeJobId }
        : {
            failures: move.failures,
            calls: move.calls,
            ...(move.openUntil ? { nextProbeAt: move.openUntil.toISOString() } : {}),
          }),
    };
    const { logger } = this.#settings;
    if (move.to === 'open') logger.warn('breaker', fields);
    else logger.info('breaker', fields);
  }

  /** Counts and logs what the database did with a batch of outcomes. */
  settled(batch: readonly PendingOutcome[], report: SettleReport): void {
    const { summary } = this;
    const { logger, clock, infoLogs } = this.#settings;
    for (const move of report.moves ?? []) this.breaker(move);
    const { metrics } = this.#settings;
    if (metrics) {
      const now = clock.now();
      for (const item of batch) {
        const state = report.lost.has(item.job.id)
          ? 'lease_lost'
          : (report.changed.get(item.job.id)?.state ?? 'completed');
        metrics.ended(item.job, state === 'queued' ? 'retry' : state, now - item.startedAt);
      }
    }
    if (!infoLogs && report.lost.size === 0 && report.changed.size === 0) {
      summary.completed += batch.length; // every one completed, and nobody wants a line per job
      return;
    }
    for (const item of batch) {
      const id = item.job.id;
      if (report.lost.has(id)) {
        summary.leaseLost++;
        logger.warn('lease_lost', {
          ...jobFields(item.job, summary.invocationId),
          outcome: 'lease_lost',
          durationMs: clock.now() - item.startedAt,
        });
        continue;
      }
      const result = report.changed.get(id);
      const state = result?.state ?? 'completed';
      if (state === 'completed') summary.completed++;
      else if (state === 'queued') summary.retried++;
      else if (state === 'dead') summary.dead++;
      else summary.cancelled++;
      if (state === 'completed' && !infoLogs) continue;
      const outcome = state === 'queued' ? 'retry' : state;
      const log = outcome === 'completed' ? logger.info : logger.warn;
      log.call(logger, 'job', {
        ...jobFields(item.job, summary.invocationId),
        outcome,
        durationMs: clock.now() - item.startedAt,
        ...(result?.state === 'queued' ? { nextRunAt: result.runAt.toISOString() } : {}),
        ...(result?.deadReason ? { reason: result.deadReason } : {}),
        // Dead or cancelled with jobs waiting for it: they were cancelled (dependency_failed) or released.
        ...(result?.hasDependents ? { hasDependents: true } : {}),
        ...(item.reason && state !== 'completed' ? { error: item.reason } : {}),
      });
    }
  }

  /** An attempt's end, for the worker's metrics (none: nothing to do). */
  #measure(job: ClaimedJob, outcome: MeteredOutcome, startedAt: number | undefined): void {
    const { metrics, clock } = this.#settings;
    if (metrics) metrics.ended(job, outcome, startedAt === undefined ? 0 : clock.now() - startedAt);
  }

  /** The loop stopped on `err`: the summary says what failed, in words and as a code. */
  failed(err: unknown): void {
    const { summary } = this;
    summary.stoppedBecause = 'error';
    summary.error =
      err instanceof SkiplockError
        ? err.message
        : `unexpected error in the invocation loop: ${err instanceof Error ? `${err.name}: ${scrubSecrets(err.message)}` : 'non-Error thrown'}`;
    summary.errorCode =
      err instanceof DatabaseError ? (err.sqlState ?? err.code) : err instanceof SkiplockError ? err.code : 'internal';
    this.#settings.logger.error('invocation_failed', { invocationId: summary.invocationId, error: summary.error });
  }

  /** The summary, with its duration, logged once. */
  close(): InvocationSummary {
    this.summary.durationMs = this.#settings.clock.now() - this.#startedAt;
    this.#settings.metrics?.invocationEnded(this.summary.stoppedBecause, this.summary.durationMs);
    this.#settings.logger.info('invocation', { ...this.summary });
    return this.summary;
  }
}
