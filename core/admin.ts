import { InvalidOptionsError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { CancelOutcome, RetryNowOutcome } from '../base/outcomes.js';
import { JOB_STATES, type JobRecord, type ParentJob, type QueueActivityRow, type QueueStatsRow } from '../base/rows.js';
import type { SkiplockConnection } from '../db/connect.js';
import { buryJobs, cancelJobs, retryNow as retryNowStatement } from '../db/statements/commands.js';
import { getJobs, type JobFilter, listJobs as listJobsStatement } from '../db/statements/jobs-read.js';
import { expireDeadlines as expireDeadlinesStatement } from '../db/statements/maintenance.js';
import { listPauses } from '../db/statements/pauses.js';
import { rollUpActivity as rollUpActivityStatement } from '../db/statements/rollups.js';
import {
  type ActivityBucket,
  activitySeries as activitySeriesStatement,
  queueActivity,
  queueStats,
} from '../db/statements/stats.js';
import { listSteps } from '../db/statements/steps.js';

/**
 * The operator's functions — the CLI and the HTTP routes call these, never db/ directly:
 * read jobs and stats, cancel, run waiting jobs now, expire deadlines.
 */
interface SchemaOption {
  /** @defaultValue 'skiplock' */
  schema?: string;
}

const JOB_ID = /^[1-9][0-9]{0,18}$/;

function checkIds(ids: readonly string[]): readonly string[] {
  const bad = ids.filter((id) => !JOB_ID.test(String(id)));
  if (bad.length > 0)
    throw new InvalidOptionsError(
      `invalid job id(s): ${bad
        .slice(0, 5)
        .map((b) => JSON.stringify(b))
        .join(', ')}`,
    );
  return ids;
}

const schemaOf = (options: SchemaOption) => assertSchemaName(options.schema ?? DEFAULT_SCHEMA);

/** Cancels queued or running jobs; finished ones are reported with their state, unchanged. */
export async function cancel(
  conn: SkiplockConnection,
  ids: readonly string[],
  options: SchemaOption = {},
): Promise<CancelOutcome[]> {
  return cancelJobs(conn.executor, schemaOf(options), checkIds(ids));
}

/** Makes waiting jobs (scheduled or retry-waiting) due now; other states are reported, unchanged. */
export async function retryNow(
  conn: SkiplockConnection,
  ids: readonly string[],
  options: SchemaOption = {},
): Promise<RetryNowOutcome[]> {
  return retryNowStatement(conn.executor, schemaOf(options), checkIds(ids));
}

/** What moveToDlq did to one id. */
export interface MoveToDlqOutcome {
  id: string;
  /** null: no such job. */
  previousState: JobRecord['state'] | null;
  moved: boolean;
}

/**
 * Moves queued or running jobs to the DLQ by hand: dead with `reason` (default `manual`), an
 * error record naming `by`. Replay brings them back. Finished ones are reported, unchanged.
 */
export async function moveToDlq(
  conn: SkiplockConnection,
  ids: readonly string[],
  options: SchemaOption & { reason?: string; by?: string } = {},
): Promise<MoveToDlqOutcome[]> {
  const reason = options.reason ?? 'manual';
  if (!/^[a-z][a-z0-9_]{0,63}$/.test(reason)) {
    throw new InvalidOptionsError('reason must be lower-case letters, digits and _ (at most 64), e.g. manual');
  }
  const by = options.by ?? 'unknown';
  if (by.length === 0 || by.length > 255) throw new InvalidOptionsError('by must be 1 to 255 characters');
  const outcomes = await buryJobs(conn.executor, schemaOf(options), checkIds(ids), { reason, by });
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, moved: o.buried }));
}

/**
 * One job with its whole history and its durable steps, or null. `now` (tests: the time a test runs
 * its jobs at) is when a sleep is judged to be over. @defaultValue now: the database's clock
 */
export async function getJob(
  conn: SkiplockConnection,
  id: string,
  options: SchemaOption & { now?: Date } = {},
): Promise<JobRecord | null> {
  const schema = schemaOf(options);
  const [job] = await getJobs(conn.executor, schema, checkIds([id]));
  if (!job) return null;
  return { ...job, steps: await listSteps(conn.executor, schema, id, options.now) };
}

/**
 * Filters of listJobs: state, queue, kind, DLQ reason, since, `beforeId` (the next page: jobs older
 * than this id) and `limit` (1..1000, default 50).
 */
export interface ListJobsOptions extends SchemaOption, JobFilter {}

/** Lists jobs newest first, filtered by state, queue, kind, DLQ reason and time. */
export async function listJobs(conn: SkiplockConnection, options: ListJobsOptions = {}): Promise<JobRecord[]> {
  const limit = options.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new InvalidOptionsError('limit must be an integer from 1 to 1000');
  }
  if (options.beforeId !== undefined) checkIds([options.beforeId]);
  if (options.state !== undefined && !(JOB_STATES as readonly string[]).includes(options.state)) {
    throw new InvalidOptionsError(`state must be one of ${JOB_STATES.join(', ')}`);
  }
  try {
    if (options.queue !== undefined) assertLabel('queue', options.queue);
    if (options.kind !== undefined) assertLabel('kind', options.kind);
  } catch (err) {
    throw new InvalidOptionsError((err as Error).message);
  }
  return listJobsStatement(conn.executor, schemaOf(options), { ...options, limit });
}

/** Depth per queue and kind (ready, scheduled, retry-waiting, running, expired leases, dead, …). */
export async function stats(conn: SkiplockConnection, options: SchemaOption = {}): Promise<QueueStatsRow[]> {
  const schema = schemaOf(options);
  const [rows, paused] = await Promise.all([queueStats(conn.executor, schema), listPauses(conn.executor, schema)]);
  const find = (scope: 'queue' | 'kind', name: string) => paused.find((p) => p.scope === scope && p.name === name);
  return rows.map((row) => {
    const p = find('queue', row.queue) ?? find('kind', row.kind);
    return { ...row, paused: p ? { scope: p.scope, since: p.pausedAt, by: p.pausedBy } : null };
  });
}

/** Throughput and error rate per queue and kind over the last `windowSeconds` (default 300). */
export async function activity(
  conn: SkiplockConnection,
  options: SchemaOption & { windowSeconds?: number } = {},
): Promise<QueueActivityRow[]> {
  return queueActivity(conn.executor, schemaOf(options), options.windowSeconds ?? 300);
}

/**
 * Jobs finished per bucket (completed, dead), oldest first: the last hour by minute, the last day
 * by hour, … `buckets` 1..1440, `bucketSeconds` 1..86400.
 */
export async function activitySeries(
  conn: SkiplockConnection,
  options: SchemaOption & { bucketSeconds: number; buckets: number; queue?: string; now?: Date },
): Promise<ActivityBucket[]> {
  const { bucketSeconds, buckets, queue } = options;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > 1440) {
    throw new InvalidOptionsError('buckets must be an integer from 1 to 1440');
  }
  if (!Number.isInteger(bucketSeconds) || bucketSeconds < 1 || bucketSeconds > 86_400) {
    throw new InvalidOptionsError('bucketSeconds must be an integer from 1 to 86400');
  }
  if (queue !== undefined) {
    try {
      assertLabel('queue', queue);
    } catch (err) {
      throw new InvalidOptionsError((err as Error).message);
    }
  }
  return activitySeriesStatement(conn.executor, schemaOf(options), { bucketSeconds, buckets, queue, now: options.now });
}

/**
 * Rolls the minutes finished since the last rollup into activity_rollups, which the stats and the
 * charts read instead of the finished rows. Maintenance runs it every tick; the console before its
 * charts. Returns the rows written (0 when another caller is rolling up at that moment).
 */
export async function rollUpActivity(
  conn: SkiplockConnection,
  options: SchemaOption & { now?: Date } = {},
): Promise<number> {
  return rollUpActivityStatement(conn.executor, schemaOf(options), { now: options.now });
}

/** Moves queued jobs past their deadline to the DLQ (`deadline_exceeded`). Returns their ids. */
export async function expireDeadlines(
  conn: SkiplockConnection,
  options: SchemaOption & { limit?: number } = {},
): Promise<string[]> {
  return expireDeadlinesStatement(conn.executor, schemaOf(options), options.limit ?? 1000);
}

export type { ActivityBucket, CancelOutcome, JobRecord, ParentJob, QueueActivityRow, QueueStatsRow, RetryNowOutcome };
