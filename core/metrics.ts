import type { BreakerState } from '../base/outcomes.js';
import type { QueueStatsRow } from '../base/rows.js';

/**
 * Metrics hooks: the worker calls them as attempts start and end and as an invocation ends, when
 * given them (`createWorker({ metrics })`); `otelMetrics()` from `skiplock/otel` implements them with
 * OpenTelemetry's metrics API. The core imports no metrics library, and without the option none of
 * this runs.
 */
export interface JobMetrics {
  /** An attempt started. */
  started(job: MeteredJob): void;
  /**
   * An attempt ended, `durationMs` after it started: completed, retry (its own or a step's), dead,
   * cancelled, suspended (a durable step's continuation, sleep or wait) or lease_lost.
   */
  ended(job: MeteredJob, outcome: MeteredOutcome, durationMs: number): void;
  /** The invocation waited `waitMs` for a rate limit's next token. */
  rateWaited(waitMs: number): void;
  /** A destination's circuit breaker moved. */
  breakerMoved(destination: string, from: BreakerState, to: BreakerState): void;
  /** An invocation ended, and why. */
  invocationEnded(stoppedBecause: string, durationMs: number): void;
}

/** Queue depth as each maintenance tick reads it (the maintenance functions' `metrics`). */
export interface QueueMetrics {
  queues(rows: readonly QueueStatsRow[]): void;
  /** Each destination's breaker state, read by the same tick (only when this is given). */
  breakers?(rows: readonly { name: string; state: BreakerState }[]): void;
}

/** Events as each publish writes them (`createEnqueuer({ metrics })`). */
export interface EventMetrics {
  /**
   * A publish wrote an event (`duplicate`: its dedupe key was taken, nothing written), for
   * `subscribers` active subscriptions, with `jobs` subscriber jobs.
   */
  published(event: { name: string; subscribers: number; jobs: number; duplicate: boolean }): void;
}

export interface MeteredJob {
  kind: string;
  queue: string;
}

export type MeteredOutcome = 'completed' | 'retry' | 'dead' | 'cancelled' | 'suspended' | 'lease_lost';
