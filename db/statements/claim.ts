import { sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import { appendCapped, epochMs, jobsRef, nowExpr } from './common.js';
import { type Outcome, type SettledJob, type SettledRow, settleJobs, settleUpdate, toSettledJob } from './settle.js';

export interface ClaimRequest {
  /** Kinds this claimer may take, each with the lease it gets (its timeout plus a grace). */
  leases: readonly { kind: string; leaseMs: number }[];
  /** Only these queues; all queues when absent. */
  queues?: readonly string[];
  limit: number;
  /** Recorded as locked_by: which invocation holds the lease. */
  invocationId: string;
  /** Test hook: the database's "now" for this statement. */
  now?: Date;
  /**
   * Outcomes of the previous batch, written in the same statement before claiming the next
   * (one round trip per batch in steady state). They are fenced exactly as settleJobs.
   */
  settle?: readonly Outcome[];
}

export interface ClaimedJob {
  id: string;
  kind: string;
  queue: string;
  payload: unknown;
  priority: number;
  attempt: number;
  maxAttempts: number;
  leaseToken: string;
  leaseExpiresAt: Date;
  correlationId: string | null;
}

/** Rows moved to the DLQ instead of running (deadline passed, attempts exhausted by rescues). */
export interface ClaimDeadJob {
  id: string;
  kind: string;
  queue: string;
  attempt: number;
  reason: 'deadline_exceeded' | 'lease_expired';
  correlationId: string | null;
}

export interface ClaimResult {
  jobs: ClaimedJob[];
  /** What became of `request.settle` (absent ids lost their lease). */
  settled: SettledJob[];
}

type ClaimRow = {
  row_kind: 'claimed' | 'settled';
  run_at_ms: number;
  id: string;
  kind: string;
  queue: string;
  payload: unknown;
  priority: number;
  attempt: number;
  max_attempts: number;
  lease_token: string;
  lease_expires_at_ms: number;
  correlation_id: string | null;
  state: string;
  dead_reason: string | null;
};

/**
 * Claims up to `limit` jobs in ONE statement (JobClaimMany), and writes the outcomes of the
 * previous batch in the same statement when given.
 *
 * Candidates come from two SKIP LOCKED subqueries — runnable queued rows in claim order,
 * and running rows whose lease expired with attempts left (rescue) — each with its own
 * LIMIT, which is the fence that stops the planner from locking more rows than we take. The
 * predicates are re-checked on each row's latest version when it is locked, so every picked
 * row runs: a fresh lease token, a lease on the database clock, one more attempt. Rows past
 * their deadline and rescues with no attempts left are never picked; buryDoomed() moves them
 * to the DLQ (the worker runs it at the start of every invocation).
 */
export async function claimJobs(db: AnyPgDatabase, schema: string, request: ClaimRequest): Promise<ClaimResult> {
  const settle = request.settle ?? [];
  if (request.limit < 1 || request.leases.length === 0) {
    return { jobs: [], settled: settle.length > 0 ? await settleJobs(db, schema, settle, request.now) : [] };
  }
  const jobs = jobsRef(schema);
  const kinds = request.leases.map((l) => l.kind);
  const rescueError = sql`jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock))`;
  const leaseMs = request.leases.map((l) => Math.max(1, Math.round(l.leaseMs)));
  const queueFilter = request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``;
  // A row this statement settles must not also be rescued by it (one row, one write).
  const notSettling = settle.length > 0 ? sql`and j.id <> all(${sql.param(settle.map((o) => o.id))}::bigint[])` : sql``;
  const settledCte = settle.length > 0 ? sql`settled as (${settleUpdate(schema, settle)}),` : sql``;
  const settledRows =
    settle.length > 0
      ? sql`union all
    select 'settled', id::text, null, null, null::jsonb, null::smallint, null::int, null::int, null,
      null::float8, null, state, dead_reason, ${epochMs(sql`run_at`)}
    from settled`
      : sql``;
  const now = sql`(select now from clock)`;
  const kindFilter = sql`j.kind = any(${sql.param(kinds)}::text[]) ${queueFilter}`;
  const notPastDeadline = sql`(j.deadline is null or j.deadline > ${now})`;
  const rows = await queryRows<ClaimRow>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    ${settledCte}
    ready as (
      select j.id from ${jobs} j
      where j.state = 'queued' and j.run_at <= ${now} and ${notPastDeadline} and ${kindFilter}
      order by j.priority, j.run_at, j.id
      limit ${request.limit}
      for update skip locked
    ),
    expired as (
      -- Rescue: a lease that ran out (its holder died or overran) with attempts left.
      select j.id from ${jobs} j
      where j.state = 'running' and j.lease_expires_at <= ${now} and j.attempt < j.max_attempts
        and ${notPastDeadline} and ${kindFilter} ${notSettling}
      order by j.lease_expires_at
      limit ${request.limit}
      for update skip locked
    ),
    claimed as (
      -- The row is locked and the predicates above were re-checked on its latest version,
      -- so every row here runs: a new token, a lease from the database clock, one more attempt.
      update ${jobs} j set
        state = 'running',
        attempt = j.attempt + 1,
        lease_token = gen_random_uuid(),
        lease_expires_at = ${now} + (${sql.param(leaseMs)}::int[])[array_position(${sql.param(kinds)}::text[], j.kind)]
          * interval '1 millisecond',
        locked_by = ${request.invocationId},
        started_at = coalesce(j.started_at, ${now}),
        attempted_at = ${now},
        updated_at = ${now},
        last_error = case when j.state = 'running' then ${rescueError} else j.last_error end,
        errors = case when j.state = 'running' then ${appendCapped(sql`j.errors`, rescueError)} else j.errors end
      from (select id from expired union all select id from ready limit ${request.limit}) p  -- rescues first: a backlog must not starve them
      where j.id = p.id
      returning j.id, j.kind, j.queue, j.payload, j.priority, j.attempt, j.max_attempts, j.lease_token,
        j.lease_expires_at, j.correlation_id, j.state, j.dead_reason, j.run_at
    )
    select * from (
      select 'claimed' as row_kind, id::text as id, kind, queue, payload, priority, attempt, max_attempts,
        lease_token::text as lease_token, ${epochMs(sql`lease_expires_at`)} as lease_expires_at_ms, correlation_id,
        state, dead_reason, ${epochMs(sql`run_at`)} as run_at_ms
      from claimed
      ${settledRows}
    ) rows
    order by rows.row_kind, rows.priority, rows.run_at_ms, rows.id::bigint`,
    schema,
  );
  const result: ClaimResult = { jobs: [], settled: [] };
  for (const row of rows) {
    if (row.row_kind === 'settled') {
      result.settled.push(toSettledJob(row as unknown as SettledRow));
    } else if (row.state === 'running') {
      result.jobs.push({
        id: row.id,
        kind: row.kind,
        queue: row.queue,
        payload: row.payload,
        priority: row.priority,
        attempt: row.attempt,
        maxAttempts: row.max_attempts,
        leaseToken: row.lease_token,
        leaseExpiresAt: new Date(row.lease_expires_at_ms),
        correlationId: row.correlation_id,
      });
    }
  }
  return result;
}

/**
 * Moves to the DLQ the rows a claim must never run (JobBuryDoomedMany): queued jobs past their
 * deadline (deadline_exceeded) and running jobs whose lease expired with no attempt left, or
 * past their deadline (lease_expired / deadline_exceeded). Each part reads only its own
 * partial index; cheap enough to run at the start of every invocation.
 */
export async function buryDoomed(
  db: AnyPgDatabase,
  schema: string,
  request: { kinds: readonly string[]; queues?: readonly string[]; limit: number; now?: Date },
): Promise<ClaimDeadJob[]> {
  const jobs = jobsRef(schema);
  const now = sql`(select now from clock)`;
  const kindFilter = sql`j.kind = any(${sql.param(request.kinds)}::text[]) ${
    request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``
  }`;
  const rescueError = sql`jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', ${now})`;
  const error = sql`(case when j.deadline <= ${now}
    then jsonb_build_object('class', 'deadline_exceeded',
      'message', 'the job''s deadline passed before it could run', 'attempt', j.attempt, 'at', ${now})
    else ${rescueError} end)`;
  const rows = await queryRows<{
    id: string;
    kind: string;
    queue: string;
    attempt: number;
    dead_reason: string;
    correlation_id: string | null;
  }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    by_deadline as (
      select j.id from ${jobs} j
      where j.state = 'queued' and j.deadline is not null and j.deadline <= ${now} and ${kindFilter}
      limit ${request.limit}
      for update skip locked
    ),
    by_lease as (
      select j.id from ${jobs} j
      where j.state = 'running' and j.lease_expires_at <= ${now}
        and (j.attempt >= j.max_attempts or j.deadline <= ${now}) and ${kindFilter}
      limit ${request.limit}
      for update skip locked
    )
    update ${jobs} j set
      state = 'dead',
      dead_reason = case when j.deadline <= ${now} then 'deadline_exceeded' else 'lease_expired' end,
      finished_at = ${now},
      lease_expires_at = null,
      last_error = ${error},
      errors = ${appendCapped(sql`j.errors`, error)},
      updated_at = ${now}
    from (select id from by_deadline union all select id from by_lease) d
    where j.id = d.id
    returning j.id::text as id, j.kind, j.queue, j.attempt, j.dead_reason, j.correlation_id`,
    schema,
  );
  return rows.map((r) => ({
    id: r.id,
    kind: r.kind,
    queue: r.queue,
    attempt: r.attempt,
    reason: r.dead_reason as ClaimDeadJob['reason'],
    correlationId: r.correlation_id,
  }));
}
