import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import { appendCapped, epochMs, jobsRef, nowExpr } from './common.js';

/** What became of one attempt, as the worker reports it. */
export type Outcome =
  | { id: string; leaseToken: string; outcome: 'completed' }
  | { id: string; leaseToken: string; outcome: 'retry'; delayMs: number; error: FailureRecord }
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
 * Writes the outcomes of a whole batch in ONE statement (JobSetStateIfRunningMany).
 * Every row is fenced: it changes only while the job is still running under the same
 * lease token. A holder whose lease expired and was re-claimed gets nothing back for
 * that job — it lost the lease, and the new holder's state stands.
 * A retry of a job that has used all its attempts goes to the DLQ as `max_attempts`.
 */
export async function settleJobs(
  db: AnyPgDatabase,
  schema: string,
  outcomes: readonly Outcome[],
  now?: Date,
): Promise<SettledJob[]> {
  if (outcomes.length === 0) return [];
  const rows = await queryRows<SettledRow>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now), settled as (${settleUpdate(schema, outcomes)})
    select id::text as id, state, dead_reason, ${epochMs(sql`run_at`)} as run_at_ms from settled`,
    schema,
  );
  return rows.map(toSettledJob);
}

export type SettledRow = { id: string; state: SettledJob['state']; dead_reason: string | null; run_at_ms: number };

export function toSettledJob(r: SettledRow): SettledJob {
  return { id: r.id, state: r.state, deadReason: r.dead_reason, runAt: new Date(r.run_at_ms) };
}

/**
 * The fenced UPDATE … RETURNING id, state, dead_reason, run_at behind settleJobs, for use as
 * a CTE next to a `clock` CTE (claimJobs runs it in the same statement as the next claim).
 * A batch of completions alone — the common case — takes a lean path over two arrays.
 */
export function settleUpdate(schema: string, outcomes: readonly Outcome[]): SQL {
  const jobs = jobsRef(schema);
  const now = sql`(select now from clock)`;
  if (outcomes.every((o) => o.outcome === 'completed')) {
    return sql`update ${jobs} j set
        lease_token = r.token,
        state = 'completed',
        finished_at = ${now},
        lease_expires_at = null,
        updated_at = ${now}
      from unnest(${sql.param(outcomes.map((o) => o.id))}::bigint[], ${sql.param(outcomes.map((o) => o.leaseToken))}::uuid[])
        as r(id, token)
      where j.id = r.id and j.lease_token = r.token and j.state = 'running'
      returning j.id, j.state, j.dead_reason, j.run_at`;
  }
  const input = outcomes.map((o) => ({
    id: o.id,
    token: o.leaseToken,
    outcome: o.outcome,
    delay_ms: o.outcome === 'retry' ? Math.max(0, Math.round(o.delayMs)) : null,
    reason: o.outcome === 'dead' ? o.reason : null,
    error: 'error' in o && o.error ? o.error : null,
  }));
  const exhausted = sql`(r.outcome = 'retry' and j.attempt >= j.max_attempts)`;
  const newState = sql`(case
    when r.outcome = 'completed' then 'completed'
    when r.outcome = 'cancelled' then 'cancelled'
    when r.outcome = 'retry' and not ${exhausted} then 'queued'
    else 'dead'
  end)`;
  return sql`update ${jobs} j set
      -- Equal to the current token by the WHERE below. Written anyway so that an audit of
      -- the row sees which token each write was made under (the chaos checker relies on it).
      lease_token = r.token,
      state = ${newState},
      dead_reason = case
        when r.outcome = 'dead' then coalesce(r.reason, 'discarded')
        when ${exhausted} then 'max_attempts'
      end,
      run_at = case when ${newState} = 'queued' then ${now} + r.delay_ms * interval '1 millisecond' else j.run_at end,
      finished_at = case when ${newState} = 'queued' then null else ${now} end,
      lease_expires_at = null,
      last_error = coalesce(r.error, j.last_error),
      errors = case when r.error is null then j.errors else ${appendCapped(sql`j.errors`, sql`r.error`)} end,
      updated_at = ${now}
    from jsonb_to_recordset(${JSON.stringify(input)}::jsonb)
      as r(id bigint, token uuid, outcome text, delay_ms bigint, reason text, error jsonb)
    where j.id = r.id and j.lease_token = r.token and j.state = 'running'
    returning j.id, j.state, j.dead_reason, j.run_at`;
}

/**
 * Gives back claimed jobs that never started (JobReleaseMany): queued again, immediately
 * claimable, and the attempt the claim counted is taken back. Fenced like settleJobs.
 */
export async function releaseJobs(
  db: AnyPgDatabase,
  schema: string,
  jobs: readonly { id: string; leaseToken: string }[],
  now?: Date,
): Promise<string[]> {
  if (jobs.length === 0) return [];
  const rows = await queryRows<{ id: string }>(
    db,
    sql`update ${jobsRef(schema)} j set
        lease_token = r.token,
        state = 'queued',
        attempt = j.attempt - 1,
        lease_expires_at = null,
        started_at = case when j.attempt - 1 = 0 then null else j.started_at end,
        updated_at = ${nowExpr(now)}
      from unnest(${sql.param(jobs.map((j) => j.id))}::bigint[], ${sql.param(jobs.map((j) => j.leaseToken))}::uuid[])
        as r(id, token)
      where j.id = r.id and j.lease_token = r.token and j.state = 'running'
      returning j.id::text as id`,
    schema,
  );
  return rows.map((r) => r.id);
}

/** Pushes a held lease to at least `ms` from now (JobExtendLease). Null when the lease was lost. */
export async function extendLease(
  db: AnyPgDatabase,
  schema: string,
  job: { id: string; leaseToken: string },
  ms: number,
  now?: Date,
): Promise<Date | null> {
  const rows = await queryRows<{ lease_expires_at_ms: number }>(
    db,
    sql`update ${jobsRef(schema)} j set
        lease_token = ${job.leaseToken},
        lease_expires_at = greatest(j.lease_expires_at, ${nowExpr(now)} + ${Math.max(0, Math.round(ms))} * interval '1 millisecond'),
        updated_at = ${nowExpr(now)}
      where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
      returning ${epochMs(sql`j.lease_expires_at`)} as lease_expires_at_ms`,
    schema,
  );
  const row = rows[0];
  return row ? new Date(row.lease_expires_at_ms) : null;
}

/** Records a running job's progress (JobSetProgress). False when the lease was lost. */
export async function reportProgress(
  db: AnyPgDatabase,
  schema: string,
  job: { id: string; leaseToken: string },
  progress: unknown,
  now?: Date,
): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`update ${jobsRef(schema)} j set lease_token = ${job.leaseToken}, progress = ${JSON.stringify(progress ?? null)}::jsonb,
        updated_at = ${nowExpr(now)}
      where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
      returning j.id::text as id`,
    schema,
  );
  return rows.length === 1;
}
