import { ConfigError, DatabaseError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { QueueStatsRow } from '../base/rows.js';
import type { SkiplockConnection } from '../db/connect.js';
import { pruneEvents, reconcileDeliveries, unsubscribedEventCounts } from '../db/statements/events.js';
import { compactCompletedCounts, expireDeadlines, pruneFinished } from '../db/statements/maintenance.js';
import { releaseParked } from '../db/statements/ordering.js';
import { pruneRollups, rollUpActivity } from '../db/statements/rollups.js';
import { pruneSignals } from '../db/statements/signals.js';
import { queueStats } from '../db/statements/stats.js';
import { pruneOrphanSteps } from '../db/statements/steps.js';
import { breakers } from './breakers.js';
import { type Clock, systemClock } from './clock.js';
import type { QueueMetrics } from './metrics.js';

export interface MaintenanceOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Completed (and cancelled) jobs are deleted this long after they finished. @defaultValue 24 h */
  completedRetentionMs?: number;
  /** Dead jobs (the DLQ) are kept longer. @defaultValue 30 days */
  deadRetentionMs?: number;
  /** Rows per delete statement; each is its own short transaction. @defaultValue 1000 */
  pruneBatchSize?: number;
  /** Stop pruning when this much of the time budget is used. @defaultValue 20000 */
  maxDurationMs?: number;
  /** The per-minute counts of finished jobs (the stats and the console's charts) are kept this long. @defaultValue 30 days */
  rollupRetentionMs?: number;
  /** Signals a wait took are kept this long; one no wait took, as long as dead jobs (deadRetentionMs). @defaultValue 24 h */
  signalRetentionMs?: number;
  /** Events (and which subscriber got each) are kept this long after they were published. @defaultValue 7 days */
  eventRetentionMs?: number;
  /**
   * The longest a transaction that publishes stays open: a subscription that became active is given
   * the events published this long either side of that moment that a concurrent publish could not
   * see it for (the reconcile). @defaultValue 5 minutes
   */
  eventReconcileMarginMs?: number;
  clock?: Clock;
  /**
   * Told the queue depth the tick read (`queues`) and, when it has a `breakers` hook, each
   * destination's breaker state, read for it: `otelMetrics()` from `skiplock/otel`, or your own.
   * @defaultValue none
   */
  metrics?: QueueMetrics;
}

export interface MaintenanceReport {
  expiredDeadlines: number;
  prunedCompleted: number;
  prunedCancelled: number;
  prunedDead: number;
  /** False when the time budget ran out before every old row was pruned. */
  pruneFinished: boolean;
  /** Parked jobs released whose ordering key was free (a cancelled head, a missed release). */
  releasedParked: number;
  /** Rows written to activity_rollups: the minutes finished since the last rollup, per queue and kind. */
  rolledUp: number;
  /** Durable steps of jobs that are gone (deleted when they completed), and old signals, deleted. */
  prunedSteps: number;
  prunedSignals: number;
  /** Events deleted past their retention (with their deliveries; their jobs have their own). */
  prunedEvents: number;
  /**
   * Jobs written for a new subscription's events that a concurrent publish could not see it for;
   * null when the role may not insert jobs (docs/roles.sql): the reconcile was skipped.
   */
  reconciledDeliveries: number | null;
  /** Events published in the last 24 hours with no subscriber, by name (flagged as a queue no worker serves is). */
  unsubscribedEvents: { name: string; count: number; lastPublishedAt: Date }[];
  stats: QueueStatsRow[];
  /**
   * The tick changed nothing and no job is ready, running or past its lease: until a job is enqueued
   * or its retention runs out, another tick would change nothing either. The platform adapters let
   * maintenance sleep on it (docs/cost.md).
   */
  quiet: boolean;
}

export const MAINTENANCE_DEFAULTS = {
  completedRetentionMs: 24 * 3_600_000,
  deadRetentionMs: 30 * 24 * 3_600_000,
  pruneBatchSize: 1_000,
  maxDurationMs: 20_000,
  rollupRetentionMs: 30 * 24 * 3_600_000,
  signalRetentionMs: 24 * 3_600_000,
  eventRetentionMs: 7 * 24 * 3_600_000,
  eventReconcileMarginMs: 5 * 60_000,
} as const;

/** How long after it became active a subscription is reconciled (the margin's events are written by then). */
const RECONCILE_HORIZON_MS = 24 * 3_600_000;

/**
 * One maintenance tick: expire deadlines to the DLQ, roll the minutes finished since the last tick
 * up (before pruning: a pruned row is counted first), prune finished jobs past their retention in
 * bounded batches, and read the queue stats (for `metrics` too, with the breakers when it takes them).
 */
export async function runMaintenance(
  conn: SkiplockConnection,
  options: MaintenanceOptions = {},
): Promise<MaintenanceReport> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const o = { ...MAINTENANCE_DEFAULTS, ...options };
  if (
    !(o.completedRetentionMs >= 0 && o.deadRetentionMs >= 0 && o.eventRetentionMs >= 0) ||
    !(o.eventReconcileMarginMs >= 0) ||
    !(o.pruneBatchSize >= 1)
  ) {
    throw new ConfigError('retention periods must be >= 0 and pruneBatchSize >= 1');
  }
  const clock = options.clock ?? systemClock;
  const stopAt = clock.now() + o.maxDurationMs;
  let expiredDeadlines = 0;
  while (clock.now() < stopAt) {
    const expired = await expireDeadlines(conn.executor, schema, o.pruneBatchSize);
    expiredDeadlines += expired.length;
    if (expired.length < o.pruneBatchSize) break;
  }
  const prune = async (state: 'completed' | 'dead' | 'cancelled', retentionMs: number) => {
    let total = 0;
    while (clock.now() < stopAt) {
      const n = await pruneFinished(conn.executor, schema, state, retentionMs, o.pruneBatchSize);
      total += n;
      if (n < o.pruneBatchSize) return { total, done: true };
    }
    return { total, done: false };
  };
  const rolledUp = await rollUpActivity(conn.executor, schema);
  await pruneRollups(conn.executor, schema, o.rollupRetentionMs);
  const completed = await prune('completed', o.completedRetentionMs);
  const cancelled = await prune('cancelled', o.completedRetentionMs);
  const dead = await prune('dead', o.deadRetentionMs);
  // Completion counts (workers that delete completed jobs) live as long as completed rows
  // would, and at least the hour the stats read; finished minutes are rolled up.
  await compactCompletedCounts(conn.executor, schema, Math.max(o.completedRetentionMs, 3_600_000));
  // Jobs deleted on completion (completedJobs: 'delete') leave their steps behind; pruning takes its own.
  let prunedSteps = 0;
  while (clock.now() < stopAt) {
    const n = await pruneOrphanSteps(conn.executor, schema, o.pruneBatchSize);
    prunedSteps += n;
    if (n < o.pruneBatchSize) break;
  }
  const now = Date.now();
  const prunedSignals = await pruneSignals(
    conn.executor,
    schema,
    new Date(now - o.signalRetentionMs),
    new Date(now - o.deadRetentionMs),
    o.pruneBatchSize,
  );
  const reconciled = await reconcileDeliveries(conn.executor, schema, {
    marginMs: o.eventReconcileMarginMs,
    horizonMs: RECONCILE_HORIZON_MS,
    limit: o.pruneBatchSize,
  }).catch((err: unknown) => {
    // A least-privilege worker role that may not write jobs (docs/roles.sql): skipped, not failed.
    if (err instanceof DatabaseError && err.sqlState === '42501') return null;
    throw err;
  });
  let prunedEvents = 0;
  while (clock.now() < stopAt) {
    const n = await pruneEvents(conn.executor, schema, {
      before: new Date(now - o.eventRetentionMs),
      limit: o.pruneBatchSize,
    });
    prunedEvents += n;
    if (n < o.pruneBatchSize) break;
  }
  // After pruning: a dead job that held its key and aged out of retention no longer holds it.
  const released = await releaseParked(conn.executor, schema, { limit: 10_000 });
  const stats = await queueStats(conn.executor, schema);
  const unsubscribedEvents = await unsubscribedEventCounts(conn.executor, schema, new Date(now - 24 * 3_600_000));
  options.metrics?.queues(stats);
  if (options.metrics?.breakers) {
    const health = await breakers(conn, { schema });
    options.metrics.breakers(health.map(({ name, state }) => ({ name, state })));
  }
  const moved =
    expiredDeadlines +
    completed.total +
    cancelled.total +
    dead.total +
    released.length +
    rolledUp +
    prunedSteps +
    (reconciled?.length ?? 0) +
    prunedEvents;
  const busy = stats.some((row) => row.ready + row.running + row.leaseExpired > 0);
  return {
    quiet: moved + prunedSignals === 0 && !busy,
    expiredDeadlines,
    prunedCompleted: completed.total,
    prunedCancelled: cancelled.total,
    prunedDead: dead.total,
    pruneFinished: completed.done && cancelled.done && dead.done,
    releasedParked: released.length,
    rolledUp,
    prunedSteps,
    prunedSignals,
    prunedEvents,
    reconciledDeliveries: reconciled === null ? null : reconciled.length,
    unsubscribedEvents,
    stats,
  };
}
