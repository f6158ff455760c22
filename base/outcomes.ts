import type { JobState } from './rows.js';
/**
 * What became of attempts and operator commands: the outcome a worker reports for an attempt, the
 * failure record it stores, and what settle, cancel, retry-now and replay report back.
 */

/**
 * What became of one attempt, as the worker reports it. `orderingKey` (the job's, when it has one)
 * lets the statement that writes the outcome release the next job of the key.
 */
export type Outcome = OutcomeOf & { orderingKey?: string; destination?: DestinationOutcomeOf };

/** What an attempt did to its destination (recorded for the destination's circuit breaker). */
export interface DestinationOutcomeOf {
  name: string;
  /** It counted against the destination: a 5xx, a timeout, a connection error, a DestinationError. */
  failed: boolean;
  /** A Retry-After that defers the whole destination, in ms; null for none. */
  deferMs: number | null;
  /** The breaker's thresholds, as the job's kind (or the worker, for this destination) sets them. */
  breaker: { failures: number; failureRate: number; windowMs: number; coolDownMs: number; maxCoolDownMs: number };
}

export type BreakerState = 'closed' | 'open' | 'half_open';

/** A breaker that changed state (for the log line and the metric). */
export interface BreakerMove {
  destination: string;
  from: BreakerState;
  to: BreakerState;
  /** open: when the next probe may go. */
  openUntil: Date | null;
  /** Failures and attempts over the rolling window when it moved. */
  failures: number;
  calls: number;
}

type OutcomeOf =
  | {
      id: string;
      leaseToken: string;
      outcome: 'completed';
      /** What the handler returned, as JSON text (already checked against maxResultBytes). */
      result?: string;
    }
  | {
      id: string;
      leaseToken: string;
      outcome: 'retry';
      delayMs: number;
      error: FailureRecord;
      /**
       * Not before the lease ends either: the attempt was abandoned (timeout, deadline) and its
       * handler may still be running. Compared on the database's clock, where the lease lives.
       */
      afterLease?: boolean;
    }
  | { id: string; leaseToken: string; outcome: 'dead'; reason: string; error: FailureRecord }
  | { id: string; leaseToken: string; outcome: 'cancelled'; error?: FailureRecord };

/** The structured failure kept in last_error and the (capped) error history. */
export interface FailureRecord {
  class: string;
  message: string;
  stack?: string;
  responseStatus?: number;
  responseBody?: string;
  attempt?: number;
  /** The durable step that failed (`ctx.step`), when a step did. */
  step?: string;
}

export interface SettledJob {
  id: string;
  state: 'completed' | 'queued' | 'dead' | 'cancelled';
  deadReason: string | null;
  runAt: Date;
  /** Jobs wait for this one (enqueue `after`): ending dead or cancelled, it cancelled or released them. */
  hasDependents?: true;
}

/**
 * What the database did with a batch of outcomes, said in as few rows as possible: the jobs
 * whose lease was lost (nothing written), and where each job went that did not simply
 * complete. Every other outcome completed.
 */
export interface SettleReport {
  lost: Set<string>;
  changed: Map<string, SettledJob>;
  /** Breakers the outcomes moved. */
  moves?: BreakerMove[];
}

/**
 * What a completion does to the job's row. `keep` (the default): the row stays, state
 * completed, until retention prunes it. `delete`: the row is deleted as the job completes — the
 * least work and WAL per job, as graphile-worker does — and only a per-minute count remains.
 */
export type Completion = 'keep' | 'delete';

export interface CancelOutcome {
  id: string;
  /** The state the job was in; only queued and running jobs can be cancelled. */
  previousState: JobState | null;
  cancelled: boolean;
}

export interface RetryNowOutcome {
  id: string;
  previousState: JobState | null;
  /** True when a waiting job (scheduled or retry-waiting) was made due now. */
  retried: boolean;
}

export interface ReplayedJob {
  id: string;
  kind: string;
  queue: string;
  deadReason: string | null;
}

export interface RefusedJob {
  id: string;
  state: JobState | null;
  message: string;
}

export interface ReplayResult {
  replayed: ReplayedJob[];
  refused: RefusedJob[];
  dryRun: boolean;
}
