import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import type { JobState } from '../schema.js';
import { appendCapped, jobsRef, nowExpr } from './common.js';

export { getJobs, type JobRecord, listJobs } from './jobs-read.js';

export interface CancelOutcome {
  id: string;
  /** The state the job was in; only queued and running jobs can be cancelled. */
  previousState: JobState | null;
  cancelled: boolean;
}

/**
 * Cancels queued or running jobs (JobCancelMany). A running job's holder keeps running
 * until it next touches the row: its completion then affects nothing (lease_lost).
 */
export async function cancelJobs(
  db: AnyPgDatabase,
  schema: string,
  ids: readonly string[],
  now?: Date,
): Promise<CancelOutcome[]> {
  const outcomes = await changeByIds(
    db,
    schema,
    ids,
    ['queued', 'running'],
    sql`state = 'cancelled',
    finished_at = ${nowExpr(now)}, lease_expires_at = null, updated_at = ${nowExpr(now)}`,
  );
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, cancelled: o.changed }));
}

/**
 * Locks the jobs with `ids`, applies `set` to those in one of `states`, and reports every id
 * with the state it was in and whether it changed (unknown ids: previousState null).
 */
async function changeByIds(
  db: AnyPgDatabase,
  schema: string,
  ids: readonly string[],
  states: readonly JobState[],
  set: SQL,
): Promise<{ id: string; previousState: JobState | null; changed: boolean }[]> {
  if (ids.length === 0) return [];
  const jobs = jobsRef(schema);
  const rows = await queryRows<{ id: string; state: JobState; changed: boolean }>(
    db,
    sql`with target as (
      select j.id, j.state from ${jobs} j where j.id = any(${sql.param(ids)}::bigint[]) for update
    ),
    changed as (
      update ${jobs} j set ${set}
      from target t where j.id = t.id and t.state = any(${sql.param(states)}::text[])
      returning j.id
    )
    select t.id::text as id, t.state, c.id is not null as changed
    from target t left join changed c on c.id = t.id`,
    schema,
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => ({ id, previousState: byId.get(id)?.state ?? null, changed: byId.get(id)?.changed ?? false }));
}

/** Moves queued jobs whose deadline passed to the DLQ (JobExpireDeadlines), at most `limit`. */
export async function expireDeadlines(db: AnyPgDatabase, schema: string, limit = 1000, now?: Date): Promise<string[]> {
  const jobs = jobsRef(schema);
  const error = sql`jsonb_build_object('class', 'deadline_exceeded',
    'message', 'the job''s deadline passed before it could run', 'attempt', j.attempt, 'at', ${nowExpr(now)})`;
  const rows = await queryRows<{ id: string }>(
    db,
    sql`with expired as (
      select id from ${jobs}
      where state = 'queued' and deadline is not null and deadline <= ${nowExpr(now)}
      order by deadline limit ${limit}
      for update skip locked
    )
    update ${jobs} j set state = 'dead', dead_reason = 'deadline_exceeded', finished_at = ${nowExpr(now)},
      last_error = ${error}, errors = ${appendCapped(sql`j.errors`, error)}, updated_at = ${nowExpr(now)}
    from expired e where j.id = e.id
    returning j.id::text as id`,
    schema,
  );
  return rows.map((r) => r.id);
}

export interface ReplayFilter {
  ids?: readonly string[];
  kind?: string;
  queue?: string;
  /** dead_reason, e.g. max_attempts, lease_expired, deadline_exceeded, http_4xx. */
  reason?: string;
  /** Died at or after this time. */
  since?: Date;
  /** Died before this time. */
  until?: Date;
}

export interface ReplayOverride {
  payload?: unknown;
  queue?: string;
  priority?: number;
  maxAttempts?: number;
}

export interface ReplayRequest {
  filter: ReplayFilter;
  limit: number;
  dryRun: boolean;
  /** Start counting attempts from zero again. */
  resetAttempts: boolean;
  override?: ReplayOverride;
  /** Who asked: recorded as replayed_by. */
  by: string;
  now?: Date;
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

/**
 * Puts dead jobs back in the queue (JobReplayDeadMany), in one statement: the row moves
 * from dead to queued, so a replay can never create a second live job, and running the
 * same replay again finds nothing dead to replay. Provenance (count, time, who) is kept on
 * the row; the error history is kept too. Ids that are not dead come back as refused.
 */
export async function replayDead(db: AnyPgDatabase, schema: string, request: ReplayRequest): Promise<ReplayResult> {
  const jobs = jobsRef(schema);
  const { filter } = request;
  const conditions: SQL[] = [sql`j.state = 'dead'`];
  if (filter.ids) conditions.push(sql`j.id = any(${sql.param(filter.ids)}::bigint[])`);
  if (filter.kind !== undefined) conditions.push(sql`j.kind = ${filter.kind}`);
  if (filter.queue !== undefined) conditions.push(sql`j.queue = ${filter.queue}`);
  if (filter.reason !== undefined) conditions.push(sql`j.dead_reason = ${filter.reason}`);
  if (filter.since) conditions.push(sql`j.finished_at >= ${filter.since.toISOString()}::timestamptz`);
  if (filter.until) conditions.push(sql`j.finished_at < ${filter.until.toISOString()}::timestamptz`);
  const where = sql.join(conditions, sql` and `);
  const override = request.override ?? {};
  const ids = filter.ids ?? [];
  const now = nowExpr(request.now);

  const change = request.dryRun
    ? sql`select id, kind, queue, dead_reason from target`
    : sql`update ${jobs} j set
          state = 'queued',
          dead_reason = null,
          finished_at = null,
          run_at = ${now},
          attempt = case when ${request.resetAttempts} then 0 else j.attempt end,
          max_attempts = coalesce(${override.maxAttempts ?? null}::int,
            case when ${request.resetAttempts} then j.max_attempts else greatest(j.max_attempts, j.attempt + 1) end),
          payload = coalesce(${override.payload === undefined ? null : JSON.stringify(override.payload)}::jsonb, j.payload),
          queue = coalesce(${override.queue ?? null}::text, j.queue),
          priority = coalesce(${override.priority ?? null}::smallint, j.priority),
          replay_count = j.replay_count + 1,
          replayed_at = ${now},
          replayed_by = ${request.by},
          updated_at = ${now}
        from target t where j.id = t.id
        returning j.id, j.kind, j.queue, t.dead_reason`;

  const rows = await queryRows<{
    id: string;
    kind: string;
    queue: string;
    dead_reason: string | null;
    outcome: string;
    state: JobState | null;
  }>(
    db,
    sql`with target as (
      select j.id, j.kind, j.queue, j.dead_reason from ${jobs} j where ${where}
      order by j.finished_at, j.id
      limit ${request.limit}
      for update skip locked
    ),
    changed as (${change}),
    asked as (select unnest(${sql.param(ids)}::bigint[]) as id)
    select c.id::text as id, c.kind, c.queue, c.dead_reason, 'replayed' as outcome, 'dead' as state from changed c
    union all
    select a.id::text, null, null, null, 'refused', j.state
    from asked a left join ${jobs} j on j.id = a.id
    where a.id not in (select id from changed)`,
    schema,
  );
  const result: ReplayResult = { replayed: [], refused: [], dryRun: request.dryRun };
  for (const row of rows) {
    if (row.outcome === 'replayed') {
      result.replayed.push({ id: row.id, kind: row.kind, queue: row.queue, deadReason: row.dead_reason });
    } else {
      result.refused.push({ id: row.id, state: row.state, message: refusalMessage(row.id, row.state) });
    }
  }
  return result;
}

function refusalMessage(id: string, state: JobState | null): string {
  if (state === null) return `job ${id} does not exist`;
  if (state === 'dead') return `job ${id} is being replayed by another caller right now`;
  return `job ${id} is ${state}, not dead: only dead jobs can be replayed`;
}

export interface QueueStatsRow {
  queue: string;
  kind: string;
  ready: number;
  scheduled: number;
  retryWaiting: number;
  running: number;
  leaseExpired: number;
  /** The DLQ: every dead job still kept. */
  dead: number;
  completedLastHour: number;
  deadLastHour: number;
  cancelledLastHour: number;
  oldestReadyAgeSeconds: number | null;
}

/**
 * Depth per queue and kind, from the queue_stats view (QueueStats). It reads live rows, the
 * DLQ and the last hour's finished rows through partial indexes — not the whole table.
 */
export async function queueStats(db: AnyPgDatabase, schema: string): Promise<QueueStatsRow[]> {
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select queue, kind, ready::int, scheduled::int, retry_waiting::int, running::int, lease_expired::int,
        dead::int, completed_1h::int, dead_1h::int, cancelled_1h::int, oldest_ready_age_seconds
      from ${sql.identifier(schema)}.queue_stats order by queue, kind`,
    schema,
  );
  return rows.map((r) => ({
    queue: r.queue as string,
    kind: r.kind as string,
    ready: r.ready as number,
    scheduled: r.scheduled as number,
    retryWaiting: r.retry_waiting as number,
    running: r.running as number,
    leaseExpired: r.lease_expired as number,
    dead: r.dead as number,
    completedLastHour: r.completed_1h as number,
    deadLastHour: r.dead_1h as number,
    cancelledLastHour: r.cancelled_1h as number,
    oldestReadyAgeSeconds: r.oldest_ready_age_seconds as number | null,
  }));
}

export interface QueueActivityRow {
  queue: string;
  kind: string;
  completed: number;
  dead: number;
  cancelled: number;
  throughputPerSecond: number;
  /** Share of the jobs that finished in the window which died; null when none finished. */
  errorRate: number | null;
}

/** Throughput and error rate over the last `windowSeconds`, via skiplock.queue_activity(). */
export async function queueActivity(
  db: AnyPgDatabase,
  schema: string,
  windowSeconds: number,
): Promise<QueueActivityRow[]> {
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select queue, kind, completed::int, dead::int, cancelled::int, throughput_per_second, error_rate
      from ${sql.identifier(schema)}.queue_activity(${Math.max(1, Math.round(windowSeconds))}::int) order by queue, kind`,
    schema,
  );
  return rows.map((r) => ({
    queue: r.queue as string,
    kind: r.kind as string,
    completed: r.completed as number,
    dead: r.dead as number,
    cancelled: r.cancelled as number,
    throughputPerSecond: r.throughput_per_second as number,
    errorRate: r.error_rate as number | null,
  }));
}

/**
 * Deletes up to `limit` finished jobs in `state` that finished before `olderThanMs` ago
 * (JobDeleteFinishedMany). Bounded so a prune never holds a long transaction; callers loop.
 */
export async function pruneFinished(
  db: AnyPgDatabase,
  schema: string,
  state: 'completed' | 'dead' | 'cancelled',
  olderThanMs: number,
  limit: number,
  now?: Date,
): Promise<number> {
  const jobs = jobsRef(schema);
  const rows = await queryRows<{ n: number }>(
    db,
    sql`with doomed as (
      select id from ${jobs}
      where state = ${state} and finished_at is not null
        and finished_at < ${nowExpr(now)} - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      order by finished_at
      limit ${limit}
      for update skip locked
    ), deleted as (
      delete from ${jobs} j using doomed d where j.id = d.id returning 1
    )
    select count(*)::int as n from deleted`,
    schema,
  );
  return rows[0]?.n ?? 0;
}

/**
 * Tidies the per-minute completion counts (CompletedCountsCompact): deletes those older than
 * `olderThanMs`, and rolls each finished minute's rows (one per settle statement) up into one
 * row per queue and kind. Writers only ever add rows for the current minute, and a late one
 * for a rolled-up minute is simply summed with it by the stats (and by the next roll-up).
 */
export async function compactCompletedCounts(
  db: AnyPgDatabase,
  schema: string,
  olderThanMs: number,
  now?: Date,
): Promise<{ pruned: number; rolledUp: number }> {
  const counts = sql`${sql.identifier(schema)}.completed_counts`;
  const rows = await queryRows<{ pruned: number; rolled_up: number }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    pruned as (
      delete from ${counts}
      where minute < (select now from clock) - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      returning 1
    ),
    finished as (
      delete from ${counts}
      where minute < date_trunc('minute', (select now from clock)) - interval '1 minute'
        and minute >= (select now from clock) - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      returning minute, queue, kind, completed
    ),
    rolled as (
      insert into ${counts} (minute, queue, kind, completed)
      select minute, queue, kind, sum(completed) from finished group by minute, queue, kind
      returning 1
    )
    select (select count(*)::int from pruned) as pruned, (select count(*)::int from rolled) as rolled_up`,
    schema,
  );
  return { pruned: rows[0]?.pruned ?? 0, rolledUp: rows[0]?.rolled_up ?? 0 };
}

export interface KindOutcomes {
  kind: string;
  total: number;
  queued: number;
  running: number;
  completed: number;
  dead: number;
  cancelled: number;
  /** Failed attempts recorded in the jobs' error histories (each is capped at the last 10). */
  failedAttempts: number;
  /** Dead jobs by reason. */
  deadReasons: Record<string, number>;
}

/** Per kind: how jobs ended and how many attempts failed on the way (KindOutcomeSummary). */
export async function kindOutcomes(db: AnyPgDatabase, schema: string): Promise<KindOutcomes[]> {
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select kind,
        count(*)::int as total,
        count(*) filter (where state = 'queued')::int as queued,
        count(*) filter (where state = 'running')::int as running,
        count(*) filter (where state = 'completed')::int as completed,
        count(*) filter (where state = 'dead')::int as dead,
        count(*) filter (where state = 'cancelled')::int as cancelled,
        coalesce(sum(jsonb_array_length(errors)), 0)::int as failed_attempts,
        coalesce(jsonb_object_agg(dead_reason, n) filter (where dead_reason is not null), '{}'::jsonb) as dead_reasons
      from (
        select j.*, count(*) over (partition by j.kind, j.dead_reason) as n from ${jobsRef(schema)} j
      ) j
      group by kind order by kind`,
    schema,
  );
  return rows.map((r) => ({
    kind: r.kind as string,
    total: r.total as number,
    queued: r.queued as number,
    running: r.running as number,
    completed: r.completed as number,
    dead: r.dead as number,
    cancelled: r.cancelled as number,
    failedAttempts: r.failed_attempts as number,
    deadReasons: r.dead_reasons as Record<string, number>,
  }));
}

export interface RetryNowOutcome {
  id: string;
  previousState: JobState | null;
  /** True when a waiting job (scheduled or retry-waiting) was made due now. */
  retried: boolean;
}

/** Makes waiting jobs due now (JobRetryNowMany); other states are reported, unchanged. */
export async function retryNow(
  db: AnyPgDatabase,
  schema: string,
  ids: readonly string[],
  now?: Date,
): Promise<RetryNowOutcome[]> {
  const outcomes = await changeByIds(
    db,
    schema,
    ids,
    ['queued'],
    sql`run_at = ${nowExpr(now)}, updated_at = ${nowExpr(now)}`,
  );
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, retried: o.changed }));
}
