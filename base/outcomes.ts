import type { JobState } from './rows.js';
/**
 * What became of attempts and operator commands: the outcome a worker reports for an attempt, the
 * failure record it stores, and what settle, cancel, retry-now and replay report back.
 */

/**
 * What became of one attempt, as the worker reports it. `orderingKey` (the job's, when it has one)
 * lets the statement that writes the outcome release the next job of the key.
 */
export type Outcome = OutcomeOf & { orderingKey?: string };

type OutcomeOf =
  | { id: string; leaseToken: string; outcome: 'completed' }
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
}

export interface SettledJob {
  id: string;
  state: 'completed' | 'queued' | 'dead' | 'cancelled';
  deadReason: string | null;
  runAt: Date;
}

/**
 * What the database did with a batch of outcomes, said in as few rows as possible: the jobs
 * whose lease was lost (nothing written), and where each job went that did not simply
 * complete. Every other outcome completed.
 */
export interface SettleReport {
  lost: Set<string>;
  changed: Map<string, SettledJob>;
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
