import { type SQL, sql } from 'drizzle-orm';
import type { ReplayResult } from '../../base/outcomes.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import type { JobState } from '../schema.js';
import { jobsRef, nowExpr } from './common.js';

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
  /**
   * What the replayed jobs keep of their durable steps: all of them (the default: the job resumes at
   * the step that failed), none (`restart`), or those before `fromStep`.
   */
  steps?: { restart?: boolean; fromStep?: string };
  now?: Date;
}

/**
 * Puts dead jobs back in the queue (JobReplayDeadMany), in one statement: the row moves
 * from dead to queued, so a replay can never create a second live job, and running the
 * same replay again finds nothing dead to replay. Provenance (count, time, who) is kept on
 * the row; the error history is kept too. Ids that are not dead come back as refused.
 */
export async function replayDead(db: Executor, schema: string, request: ReplayRequest): Promise<ReplayResult> {
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
          -- A job of an ordering key goes back to the head of its key's line: it waits parked while
          -- another job of the key runs or is queued to run, and is the next one released.
          run_at = case when j.ordering_key is not null and exists (
              select 1 from ${jobs} o where o.ordering_key = j.ordering_key and o.id <> j.id
                and o.state in ('queued', 'running') and (o.state = 'running' or o.run_at <> 'infinity'))
            then 'infinity'::timestamptz else ${now} end,
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
    changed as (${change}),${request.dryRun ? sql`` : stepsReplayed(schema, request)}
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

/**
 * The replayed jobs' durable steps: forgotten from `fromStep` on, or all of them (`restart`); a step
 * that ran out of attempts gets them back when the job's are reset. A data-modifying CTE runs even
 * though no one reads it.
 */
function stepsReplayed(schema: string, request: ReplayRequest): SQL {
  const steps = sql`${sql.identifier(schema)}.job_steps`;
  const { restart, fromStep } = request.steps ?? {};
  const forget = restart
    ? sql` forgotten as (delete from ${steps} s using changed c where s.job_id = c.id returning 1),`
    : fromStep !== undefined
      ? sql` forgotten as (delete from ${steps} s using changed c where s.job_id = c.id
          and s.position >= (select f.position from ${steps} f where f.job_id = c.id and f.name = ${fromStep})
          returning 1),`
      : sql``;
  // Only the steps kept: a row both updated here and deleted by `forgotten` would see one of the two
  // take effect, unpredictably (both CTEs run on one snapshot) — in practice the update, which kept it.
  const kept =
    fromStep !== undefined
      ? sql` and s.position < coalesce((select f.position from ${steps} f where f.job_id = c.id and f.name = ${fromStep}), 2147483647)`
      : sql``;
  const reset =
    request.resetAttempts && !restart
      ? sql` step_attempts as (update ${steps} s set attempts = 0 from changed c
        where s.job_id = c.id and s.state = 'failed'${kept} returning 1),`
      : sql``;
  return sql`${forget}${reset}`;
}

function refusalMessage(id: string, state: JobState | null): string {
  if (state === null) return `job ${id} does not exist`;
  if (state === 'dead') return `job ${id} is being replayed by another caller right now`;
  return `job ${id} is ${state}, not dead: only dead jobs can be replayed`;
}
