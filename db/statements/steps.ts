import { type SQL, sql } from 'drizzle-orm';
import type { FailureRecord } from '../../base/outcomes.js';
import type { JobStep } from '../../base/rows.js';
import { queryHotRows, queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { appendCapped, epochMs, jobsRef, nowExpr, toDate } from './common.js';

/**
 * The statements of durable steps (`ctx.step`, `ctx.sleep`). Every write is fenced on the job's
 * lease like a settle: it happens only while the job is running under the writer's lease token.
 * A job that uses no step never reaches this file.
 */

/** A step a job reached, as stored. */
export interface StepRow {
  name: string;
  position: number;
  type: 'run' | 'sleep' | 'signal';
  state: 'completed' | 'failed' | 'waiting';
  attempts: number;
  /** The step's result as JSON text (null when it returned nothing or has not completed). */
  resultJson: string | null;
  durationMs: number | null;
}

/** What is written for one step. */
export interface StepWrite {
  name: string;
  position: number;
  type: 'run' | 'sleep';
  state: 'completed' | 'failed';
  attempts: number;
  /** JSON text, already checked against the size limit. */
  resultJson?: string;
  error?: FailureRecord;
  durationMs?: number;
}

const stepsRef = (schema: string): SQL => sql`${sql.identifier(schema)}.job_steps`;

/**
 * A step's read and its record are hot statements (Executor.hot), and cheap: each finds its rows by
 * primary key. On pg each is then a named statement the connection plans once; planned at every
 * send, each took ~0.4 ms more of a step's ~1.2 ms (bench/steps.ts, no-op steps).
 */
const STEP_HINT = { cheap: true } as const;

/**
 * The steps one job reached, in the order it reached them (JobStepsGet), read when the job reaches
 * its first step — and, in the same statement, its lease pushed to at least `leaseMs` from now: a
 * job with steps usually runs longer than the lease its claim took. Null when the lease was lost.
 * Sent on its own (autocommit): its commit does not wait for the WAL flush (readStepsStatement).
 */
export async function readSteps(
  db: Executor,
  schema: string,
  job: { id: string; leaseToken: string },
  leaseMs: number,
  now?: Date,
): Promise<StepRow[] | null> {
  const rows = await queryHotRows<ReadStepsRow>(db, readStepsStatement(schema, job, leaseMs, now), schema, STEP_HINT);
  if (rows.length === 0) return null;
  return rows
    .filter((r) => r.name !== null)
    .map((r) => ({
      name: r.name as string,
      position: Number(r.position),
      type: r.type as StepRow['type'],
      state: r.state as StepRow['state'],
      attempts: Number(r.attempts),
      resultJson: r.result_json,
      durationMs: r.duration_ms === null ? null : Number(r.duration_ms),
    }));
}

interface ReadStepsRow {
  held: boolean;
  name: string | null;
  position: number | null;
  type: StepRow['type'] | null;
  state: StepRow['state'] | null;
  attempts: number | null;
  result_json: string | null;
  duration_ms: number | null;
}

/**
 * readSteps' statement. Its one write, the lease extension, commits without waiting for the WAL
 * flush (`synchronous_commit` off for its own transaction, which COMMIT still sees): a job's first
 * step waited for two flushes, this one and its record's, where a DBOS step waits for one. The
 * commit is visible to other sessions at once like any other; only a crash of the database before
 * the WAL writer flushes it (≤ 3 × wal_writer_delay later) loses it, and any flushed commit after it
 * — the step's record, another session's — flushes it too. What is lost is the extension alone, and
 * that is safe: the lease is the claim's again, so the holder may run its step past its lease, as a
 * holder that froze already can; a rescue may then run that step again (a non-transactional step is
 * at least once), and the stale holder's record, fenced on its token, writes nothing (lease_lost) —
 * a transactional step commits nothing. The steps it reads were recorded by flushed commits. Sent
 * on its own, never in a caller's transaction, whose commit it would make asynchronous too.
 */
export function readStepsStatement(
  schema: string,
  job: { id: string; leaseToken: string },
  leaseMs: number,
  now?: Date,
): SQL {
  const clock = nowExpr(now);
  return sql`with extended as (
        update ${jobsRef(schema)} j set
          lease_token = ${job.leaseToken},
          lease_expires_at = greatest(j.lease_expires_at, ${clock} + ${Math.max(0, Math.round(leaseMs))} * interval '1 millisecond'),
          updated_at = ${clock}
        where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
        returning j.id
      ),
      commit_unflushed as (select set_config('synchronous_commit', 'off', true))
      select true as held, s.name, s.position, s.type, s.state, s.attempts, s.result::text as result_json, s.duration_ms
      from extended e cross join commit_unflushed left join ${stepsRef(schema)} s on s.job_id = e.id
      order by s.position`;
}

/**
 * The steps of one job as an operator sees them (JobStepsList): no results, their sizes. A sleep is
 * stored completed as the job goes to sleep (reaching it again must not sleep twice), so whether it
 * is still going on is read here: the job's last step, the job queued and due later, its end not
 * reached — `sleeping`, with no finish yet; once over, it finished at its end. A sleep written without
 * its end (timeout_at; by an earlier version) ends at the job's run_at when it is the last step.
 * `now` is when that is judged. @defaultValue the database's clock
 */
export async function listSteps(db: Executor, schema: string, jobId: string, now?: Date): Promise<JobStep[]> {
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
      steps as (
        select s.*, s.position = max(s.position) over () as last, j.state as job_state, j.run_at as job_run_at
        from ${stepsRef(schema)} s left join ${jobsRef(schema)} j on j.id = s.job_id
        where s.job_id = ${jobId}
      ),
      ended as (
        select s.*, case when s.type = 'sleep' then coalesce(s.timeout_at, case when s.last then s.job_run_at end) end as wake_at
        from steps s
      ),
      shown as (
        select e.*, (e.type = 'sleep' and e.last and e.job_state = 'queued' and e.job_run_at > c.now
          and e.job_run_at <> 'infinity' and e.wake_at > c.now) as sleeping, c.now
        from ended e, clock c
      )
      select name, position, type, case when sleeping then 'sleeping' else state end as state, attempts,
        duration_ms, octet_length(result::text) as result_bytes, last_error, signal_key,
        ${epochMs(sql`started_at`)} as started_at_ms,
        ${epochMs(sql`case when sleeping then null when type = 'sleep' and wake_at <= now then wake_at else finished_at end`)} as finished_at_ms,
        ${epochMs(sql`case when type = 'signal' then timeout_at end`)} as timeout_at_ms,
        ${epochMs(sql`wake_at`)} as wake_at_ms
      from shown order by position`,
    schema,
  );
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return rows.map((r) => ({
    name: r.name as string,
    position: Number(r.position),
    type: r.type as JobStep['type'],
    state: r.state as JobStep['state'],
    attempts: Number(r.attempts),
    durationMs: n(r.duration_ms),
    resultBytes: n(r.result_bytes),
    lastError: (r.last_error as Record<string, unknown> | null) ?? null,
    startedAt: toDate(n(r.started_at_ms)),
    finishedAt: toDate(n(r.finished_at_ms)),
    signalKey: (r.signal_key as string | null) ?? null,
    timeoutAt: toDate(n(r.timeout_at_ms)),
    wakeAt: toDate(n(r.wake_at_ms)),
  }));
}

/**
 * The upsert of one step row, for the rows of `holder` (a CTE or subquery yielding the job's id, and
 * its run_at for a sleep). A sleep starts now and keeps its end (the job's run_at as it goes to
 * sleep) in timeout_at, which a wait keeps its timeout in: what listSteps reads to say it sleeps.
 */
function upsertStep(schema: string, holder: SQL, step: StepWrite, now: SQL): SQL {
  const completed = step.state === 'completed';
  const sleep = step.type === 'sleep';
  const duration = step.durationMs === undefined ? null : Math.max(0, Math.round(step.durationMs));
  const started =
    duration !== null ? sql`${now} - ${duration} * interval '1 millisecond'` : sleep ? now : sql`null::timestamptz`;
  return sql`insert into ${stepsRef(schema)} as s
      (job_id, name, position, type, state, attempts, result, last_error, duration_ms, started_at, finished_at, timeout_at)
    select h.id, ${step.name}, ${step.position}, ${step.type}, ${step.state}, ${step.attempts},
      ${step.resultJson ?? null}::jsonb, ${step.error ? JSON.stringify(step.error) : null}::jsonb,
      ${duration}::int, ${started}, ${completed ? now : sql`null::timestamptz`},
      ${sleep ? sql`h.run_at` : sql`null::timestamptz`}
    from ${holder} h
    on conflict (job_id, name) do update set
      state = excluded.state,
      attempts = excluded.attempts,
      result = excluded.result,
      last_error = coalesce(excluded.last_error, s.last_error),
      duration_ms = excluded.duration_ms,
      started_at = excluded.started_at,
      finished_at = excluded.finished_at
    -- A completed step stays completed: a transactional step whose commit landed but whose answer
    -- was lost is seen as failed by its runner, and must not be turned back into one that runs again.
    where s.state <> 'completed' or excluded.state = 'completed'
    returning 1`;
}

/**
 * Records a step (JobStepRecord): its completion with its result, or a failure that ends the job.
 * The job's row is locked FOR SHARE until the statement's transaction commits — inside a
 * transactional step's own transaction, until the step's writes commit — so no other holder can take
 * the job (a rescue's claim updates the row) between this fence and the commit. False when the lease
 * was lost.
 */
export async function recordStep(
  db: Executor,
  schema: string,
  job: { id: string; leaseToken: string },
  step: StepWrite,
  options: { now?: Date } = {},
): Promise<boolean> {
  const now = nowExpr(options.now);
  const rows = await queryHotRows<{ n: number }>(
    db,
    sql`with held as (
        select j.id, j.run_at from ${jobsRef(schema)} j
        where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
        for share
      ),
      written as (${upsertStep(schema, sql`held`, step, now)})
      select count(*)::int as n from written`,
    schema,
    STEP_HINT,
  );
  return Number(rows[0]?.n ?? 0) === 1;
}

/** How a job leaves its invocation without ending (JobSuspend). */
export interface Suspension {
  /** Runnable again this long after now (the database's). */
  delayMs?: number;
  /** Runnable again at this time; with delayMs, whichever is later. */
  wakeAt?: Date;
  /** Not before its lease ends either: a step it abandoned (timed out) may still be running. */
  afterLease?: boolean;
  /** A failure kept as the job's last error and in its history (a step that will be retried). */
  error?: FailureRecord;
  /** The step row written with it, in the same statement (a sleep, a step's failed attempt). */
  step?: StepWrite;
}

/**
 * Gives a running job back to the queue without ending it and without using an attempt (the claim
 * counted one: it is taken back): a continuation in a later invocation, a durable sleep, a step's
 * retry. The step row it carries is written in the same statement, so a sleep is never recorded
 * without the job going to sleep. Returns when the job may run again, or null when the lease was lost.
 */
export async function suspendJob(
  db: Executor,
  schema: string,
  job: { id: string; leaseToken: string },
  suspension: Suspension,
  now?: Date,
): Promise<Date | null> {
  const clock = nowExpr(now);
  const delay = Math.max(0, Math.round(suspension.delayMs ?? 0));
  const wake = suspension.wakeAt ? sql`${suspension.wakeAt.toISOString()}::timestamptz` : sql`null::timestamptz`;
  const error = suspension.error ? JSON.stringify(suspension.error) : null;
  const step = suspension.step
    ? sql`, written as (${upsertStep(schema, sql`released`, suspension.step, clock)})`
    : sql``;
  const rows = await queryRows<{ run_at_ms: number }>(
    db,
    sql`with released as (
        update ${jobsRef(schema)} j set
          lease_token = ${job.leaseToken},
          state = 'queued',
          attempt = j.attempt - 1,
          run_at = greatest(${clock} + ${delay} * interval '1 millisecond', ${wake},
            ${suspension.afterLease ? sql`j.lease_expires_at` : sql`null::timestamptz`}),
          started_at = case when j.attempt - 1 = 0 then null else j.started_at end,
          lease_expires_at = null,
          last_error = coalesce(${error}::jsonb, j.last_error),
          errors = case when ${error}::jsonb is null then j.errors else ${appendCapped(sql`j.errors`, sql`${error}::jsonb`)} end,
          updated_at = ${clock}
        where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
        returning j.id, j.run_at
      )${step}
      select ${epochMs(sql`r.run_at`)} as run_at_ms from released r
      ${suspension.step ? sql`where (select count(*) from written) >= 0` : sql``}`,
    schema,
  );
  const row = rows[0];
  return row ? new Date(Number(row.run_at_ms)) : null;
}

/**
 * Deletes the steps of jobs that no longer exist (deleted on completion, pruned, purged), at most
 * `limit` per call (JobStepsPrune). Maintenance runs it; steps have no foreign key to jobs.
 */
export async function pruneOrphanSteps(db: Executor, schema: string, limit = 5_000): Promise<number> {
  const rows = await queryRows<{ n: number }>(
    db,
    sql`with orphans as (
        select s.job_id, s.name from ${stepsRef(schema)} s
        where not exists (select 1 from ${jobsRef(schema)} j where j.id = s.job_id)
        limit ${limit}
      ),
      deleted as (
        delete from ${stepsRef(schema)} s using orphans o
        where s.job_id = o.job_id and s.name = o.name
        returning 1
      )
      select count(*)::int as n from deleted`,
    schema,
  );
  return Number(rows[0]?.n ?? 0);
}

/** Forgets a job's steps, all of them or from the one named on (JobStepsReset): a replay from there. */
export async function resetSteps(db: Executor, schema: string, jobId: string, from?: string): Promise<number> {
  const rows = await queryRows<{ n: number }>(
    db,
    sql`with deleted as (
        delete from ${stepsRef(schema)} s where s.job_id = ${jobId}
        ${from === undefined ? sql`` : sql`and s.position >= (select f.position from ${stepsRef(schema)} f where f.job_id = ${jobId} and f.name = ${from})`}
        returning 1
      )
      select count(*)::int as n from deleted`,
    schema,
  );
  return Number(rows[0]?.n ?? 0);
}
