import { type SQL, sql } from 'drizzle-orm';
import type { CancelOutcome, RetryNowOutcome } from '../../base/outcomes.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import type { JobState } from '../schema.js';
import { appendCapped, jobsRef, nowExpr } from './common.js';
import { releaseAfterCtes } from './ordering.js';

/**
 * Cancels queued or running jobs (JobCancelMany). A running job's holder keeps running
 * until it next touches the row: its completion then affects nothing (lease_lost).
 */
export async function cancelJobs(
  db: Executor,
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
    // A cancelled job of an ordering key hands its key to the next job at once.
    releaseAfterCtes(schema, sql`select id, 'cancelled'::text as state from changed`),
  );
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, cancelled: o.changed }));
}

/**
 * Moves queued or running jobs to the DLQ by hand (JobBuryMany): dead with `reason` (default
 * `manual`), an error record saying who did it. A running job's holder learns it has lost the job
 * when it next touches the row (lease_lost); the next job of its ordering key is released unless
 * the key is held by dead jobs; waiting children are cancelled by the dependents trigger.
 */
export async function buryJobs(
  db: Executor,
  schema: string,
  ids: readonly string[],
  request: { reason: string; by: string },
  now?: Date,
): Promise<{ id: string; previousState: JobState | null; buried: boolean }[]> {
  const error = sql`jsonb_build_object('class', 'moved_to_dlq',
    'message', ${`moved to the DLQ by ${request.by}`}::text, 'attempt', attempt, 'at', ${nowExpr(now)})`;
  const outcomes = await changeByIds(
    db,
    schema,
    ids,
    ['queued', 'running'],
    sql`state = 'dead', dead_reason = ${request.reason}, finished_at = ${nowExpr(now)}, lease_expires_at = null,
    last_error = ${error}, errors = ${appendCapped(sql`errors`, error)}, updated_at = ${nowExpr(now)}`,
    releaseAfterCtes(schema, sql`select id, 'dead'::text as state from changed`),
  );
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, buried: o.changed }));
}

/**
 * Locks the jobs with `ids`, applies `set` to those in one of `states`, and reports every id
 * with the state it was in and whether it changed (unknown ids: previousState null).
 */
async function changeByIds(
  db: Executor,
  schema: string,
  ids: readonly string[],
  states: readonly JobState[],
  set: SQL,
  after?: SQL,
  where: SQL = sql``,
): Promise<{ id: string; previousState: JobState | null; changed: boolean }[]> {
  if (ids.length === 0) return [];
  const jobs = jobsRef(schema);
  const rows = await queryRows<{ id: string; state: JobState; changed: boolean }>(
    db,
    sql`with clock as (select ${nowExpr(undefined)} as now),
    target as (
      select j.id, j.state from ${jobs} j where j.id = any(${sql.param(ids)}::bigint[]) for update
    ),
    changed as (
      update ${jobs} j set ${set}
      from target t where j.id = t.id and t.state = any(${sql.param(states)}::text[]) ${where}
      returning j.id
    )${after ? sql`, ${after}` : sql``}
    select t.id::text as id, t.state, c.id is not null as changed
    from target t left join changed c on c.id = t.id`,
    schema,
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => ({ id, previousState: byId.get(id)?.state ?? null, changed: byId.get(id)?.changed ?? false }));
}

/** Makes waiting jobs due now (JobRetryNowMany); other states are reported, unchanged. */
export async function retryNow(
  db: Executor,
  schema: string,
  ids: readonly string[],
  now?: Date,
): Promise<RetryNowOutcome[]> {
  const outcomes = await changeByIds(
    db,
    schema,
    ids,
    ['queued'],
    // A job parked behind its ordering key's running job, or waiting for its parents, keeps waiting
    // for its turn: reported unchanged.
    sql`run_at = ${nowExpr(now)}, updated_at = ${nowExpr(now)}`,
    undefined,
    sql`and j.run_at <> 'infinity'`,
  );
  return outcomes.map((o) => ({ id: o.id, previousState: o.previousState, retried: o.changed }));
}
