import { type SQL, sql } from 'drizzle-orm';
import type { KindOutcomes, QueueActivityRow, QueueStatsRow } from '../../base/rows.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { jobsRef, nowExpr } from './common.js';

/**
 * Depth per queue and kind, from the queue_stats view (QueueStats). It reads live rows, the
 * DLQ and the last hour's finished rows through partial indexes — not the whole table.
 */
export async function queueStats(
  db: Executor,
  schema: string,
  options: { unservedAfterMinutes?: number } = {},
): Promise<QueueStatsRow[]> {
  const suspended = await suspendedCounts(db, schema);
  const serving = await workersServing(db, schema, options.unservedAfterMinutes ?? UNSERVED_AFTER_MINUTES);
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select queue, kind, ready::int, scheduled::int, retry_waiting::int, waiting::int, running::int, lease_expired::int,
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
    waiting: r.waiting as number,
    running: r.running as number,
    leaseExpired: r.lease_expired as number,
    dead: r.dead as number,
    completedLastHour: r.completed_1h as number,
    deadLastHour: r.dead_1h as number,
    cancelledLastHour: r.cancelled_1h as number,
    oldestReadyAgeSeconds: r.oldest_ready_age_seconds as number | null,
    sleeping: suspended.get(`${r.queue}\u0000${r.kind}`)?.sleeping ?? 0,
    waitingForSignal: suspended.get(`${r.queue}\u0000${r.kind}`)?.waiting ?? 0,
    unserved: (r.ready as number) > 0 && serving !== null && serving(r.queue as string, r.kind as string) === 'none',
    unfit: (r.ready as number) > 0 && serving !== null ? unfitFor(serving(r.queue as string, r.kind as string)) : null,
    paused: null,
  }));
}

/** A queue and kind with ready jobs is flagged when no worker served it for this long. */
export const UNSERVED_AFTER_MINUTES = 10;

/**
 * How the workers seen lately serve a queue and kind: `none` serves it; `unfit` — some serve it, and
 * the invocations of each are too short for its timeoutMs (with the longest budget among them);
 * `fits` — a worker runs it (or one that did not record its unfit kinds, an older release).
 */
type Serving = 'none' | 'fits' | { unfit: { budgetMs: number } };

const unfitFor = (serving: Serving) => (typeof serving === 'object' ? serving.unfit : null);

/**
 * How the workers serve a queue and kind in the last `minutes` (WorkersSeen), from the `workers`
 * rows: each lists its kinds and queues (null: every queue), and the kinds its invocations are too
 * short for. Null when no worker recorded itself in the last day — nothing to judge by (workers of
 * an older release, or none deployed yet).
 */
async function workersServing(
  db: Executor,
  schema: string,
  minutes: number,
): Promise<((queue: string, kind: string) => Serving) | null> {
  const rows = await queryRows<{
    queues: string[] | null;
    kinds: string[];
    unfit_kinds: string[] | null;
    budget_ms: number | null;
    recent: boolean;
  }>(
    db,
    sql`select queues, kinds, unfit_kinds, budget_ms,
        seen_at > now() - ${Math.max(1, Math.round(minutes))} * interval '1 minute' as recent
      from ${sql.identifier(schema)}.workers where seen_at > now() - interval '1 day'`,
    schema,
  );
  if (rows.length === 0) return null;
  const recent = rows.filter((r) => r.recent);
  return (queue, kind) => {
    const serving = recent.filter((r) => r.kinds.includes(kind) && (r.queues === null || r.queues.includes(queue)));
    if (serving.length === 0) return 'none';
    if (serving.some((r) => !r.unfit_kinds?.includes(kind))) return 'fits';
    return { unfit: { budgetMs: Math.max(...serving.map((r) => r.budget_ms ?? 0)) } };
  };
}

/**
 * Jobs back in the queue until later because of a durable step, per queue and kind (JobsSuspendedCount):
 * those whose last step is a sleep, and those waiting for a signal. Only queued jobs due later are
 * looked at (the partial indexes of queued rows), each with one probe of its last step.
 */
async function suspendedCounts(
  db: Executor,
  schema: string,
): Promise<Map<string, { sleeping: number; waiting: number }>> {
  const jobs = jobsRef(schema);
  const rows = await queryRows<{ queue: string; kind: string; sleeping: number; waiting: number }>(
    db,
    sql`with later as (
        select id, queue, kind from ${jobs} where state = 'queued' and concurrency_key is null
          and run_at > now() and run_at <> 'infinity'
        union all
        select id, queue, kind from ${jobs} where state = 'queued' and concurrency_key is not null
          and run_at > now() and run_at <> 'infinity'
      )
      select l.queue, l.kind,
        count(*) filter (where last.type = 'sleep')::int as sleeping,
        count(*) filter (where last.state = 'waiting')::int as waiting
      from later l
      cross join lateral (
        select s.type, s.state from ${sql.identifier(schema)}.job_steps s
        where s.job_id = l.id order by s.position desc limit 1
      ) last
      group by l.queue, l.kind`,
    schema,
  );
  return new Map(
    rows.map((r) => [`${r.queue}\u0000${r.kind}`, { sleeping: Number(r.sleeping), waiting: Number(r.waiting) }]),
  );
}

/** Throughput and error rate over the last `windowSeconds`, via skiplock.queue_activity(). */
export async function queueActivity(db: Executor, schema: string, windowSeconds: number): Promise<QueueActivityRow[]> {
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

/** Per kind: how jobs ended and how many attempts failed on the way (KindOutcomeSummary). */
export async function kindOutcomes(db: Executor, schema: string): Promise<KindOutcomes[]> {
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

/** One bucket of finished jobs: completions (rows and per-minute counts) and deaths. */
export interface ActivityBucket {
  /** The bucket's start (epoch ms). */
  startMs: number;
  completed: number;
  dead: number;
}

/**
 * Jobs finished per bucket, oldest bucket first, for the console's charts: `buckets` buckets of
 * `bucketSeconds` on whole multiples of it (minutes, hours), the last one holding now. The minutes
 * rolled up into activity_rollups, then — after them — completed and dead rows (jobs_finished_idx)
 * and the completed_counts of deleted ones. `queue` narrows it to one queue.
 */
export async function activitySeries(
  db: Executor,
  schema: string,
  request: { bucketSeconds: number; buckets: number; queue?: string; now?: Date },
): Promise<ActivityBucket[]> {
  const { bucketSeconds: size, buckets } = request;
  const jobs = jobsRef(schema);
  const counts = sql`${sql.identifier(schema)}.completed_counts`;
  const rollups = sql`${sql.identifier(schema)}.activity_rollups`;
  const since = sql`(select since from bounds)`;
  const after = sql`(select after from bounds)`;
  const bucketOf = (at: SQL) => sql`floor(extract(epoch from (${at} - ${since})) / ${size}::float8)::int`;
  const queue = (alias: string) =>
    request.queue === undefined ? sql`` : sql`and ${sql.raw(alias)}.queue = ${request.queue}`;
  const rows = await queryRows<{ start_ms: number; completed: number; dead: number }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    window_start as (
      select to_timestamp((floor(extract(epoch from now) / ${size}::float8) + 1 - ${buckets}::int) * ${size}::float8) as since
      from clock
    ),
    bounds as (
      select w.since, greatest(w.since,
        coalesce((select max(r.minute) + interval '1 minute' from ${rollups} r), '-infinity')) as after
      from window_start w
    ),
    finished as (
      select ${bucketOf(sql`r.minute`)} as i, sum(r.completed) as completed, sum(r.dead) as dead
      from ${rollups} r
      where r.minute >= ${since} and r.minute < ${after} ${queue('r')}
      group by 1
      union all
      select ${bucketOf(sql`j.finished_at`)},
        count(*) filter (where j.state = 'completed'), count(*) filter (where j.state = 'dead')
      from ${jobs} j
      where j.state in ('completed', 'dead') and j.finished_at is not null and j.finished_at >= ${after}
        and j.finished_at <= (select now from clock) ${queue('j')}
      group by 1
      union all
      select ${bucketOf(sql`c.minute`)}, sum(c.completed), 0 from ${counts} c
      where c.minute >= ${after} and c.minute <= (select now from clock) ${queue('c')}
      group by 1
    )
    select (extract(epoch from ${since}) * 1000 + b.i * ${size * 1000}::float8)::float8 as start_ms,
      coalesce(sum(f.completed), 0)::int as completed, coalesce(sum(f.dead), 0)::int as dead
    from generate_series(0, ${buckets - 1}::int) as b(i) left join finished f on f.i = b.i
    group by b.i order by b.i`,
    schema,
  );
  return rows.map((r) => ({ startMs: Number(r.start_ms), completed: r.completed, dead: r.dead }));
}
