import type pg from 'pg';
import { SUBSCRIBER_KINDS } from './events.js';
import { SCHEDULED_KIND } from './job.js';
import { RUNTIME_KIND } from './runtime-schedules.js';

/** The kinds the workers enqueue themselves (schedules): checked on their own, not as the harness's jobs. */
const OWN_KINDS = `'${SCHEDULED_KIND}', '${RUNTIME_KIND}'`;

import { checkSteps, type StepCheckResult } from './step-checker.js';

/** The queue the harness pauses and resumes while the run goes on (a quarter of the jobs). */
export const PAUSED_QUEUE = 'chaos-paused';
/** The queue the run limits at run time: at most LIMITED.queue running, LIMITED.perKey per key. */
export const LIMITED = { queue: 'chaos-limited', maxRunning: 6, perKey: 2, keys: 8 } as const;

export interface CheckResult extends StepCheckResult {
  enqueued: number;
  /** Enqueue committed, but the job is missing or did not end completed, dead or cancelled. */
  lost: number;
  /** Completed jobs the harness never enqueued. */
  unexpected: number;
  /** Writes that took effect under a token other than the row's current one. */
  staleWrites: number;
  dead: number;
  completed: number;
  /** Cancelled jobs: those whose parent died (dependency_failed). */
  cancelled: number;
  maxExecutions: number;
  /** Jobs executed more than once. */
  reExecuted: number;
  /** Executions whose lease never ended by a recorded transition (nothing explains them). */
  unexplainedExecutions: number;
  /** The same job executed twice under one lease token (one claim run twice). */
  duplicateTokenExecutions: number;
  /** Dead by max_attempts or lease_expired without exactly max_attempts attempts. */
  attemptAccountingErrors: number;
  /**
   * Attempts started (a claim or a rescue) on a job of the paused queue by a statement that began
   * after a pause was known committed and before its resume was sent.
   */
  pauseViolations: number;
  /**
   * Jobs of an ordering key first claimed before a job of the same key enqueued earlier (lower id),
   * or claimed while another job of the key was running (by the audit's claim and end records).
   */
  orderViolations: number;
  /**
   * Claims in the limited queue that made more of its jobs hold a lease than its limit, or than
   * the per-key limit for their key, from the recorded history (lease intervals: claim → the next
   * transition out of that lease).
   */
  limitViolations: number;
  /**
   * Attempts of a job with parents started before each parent's completion (for 'run' mode: before
   * each parent ended), and jobs in 'cancel' mode with a dead or cancelled parent that did not end
   * cancelled as dependency_failed (from the audit, and the jobs' final states).
   */
  dependencyViolations: number;
  /** Occurrences of the every-second schedule that became more than one job. */
  scheduleDuplicates: number;
  /** Occurrences of it enqueued (as jobs, live or executed). */
  scheduled: number;
  /** Jobs enqueued through the driver under test while the faults were on (the live enqueues). */
  liveEnqueued: number;
  /** Dedupe keys of the live enqueues, each sent until answered, that got more than one job. */
  enqueueDuplicates: number;
  /** Dead jobs the harness replayed (each as one replay, sent until answered), and those replayed more than once. */
  replayed: number;
  replayDuplicates: number;
}

/**
 * Classifies every job of a finished run (Jepsen-style: from the recorded history, not from
 * what the workers said about themselves).
 */
export async function checkRun(pool: pg.Pool, schema: string): Promise<CheckResult> {
  const s = `"${schema}"`;
  const one = async (text: string) => Number((await pool.query(text)).rows[0]?.n ?? 0);
  const enqueued = await one(`select count(*) as n from ${s}.chaos_enqueued`);
  // A job whose row is gone counts as completed only if the audit saw a holder's completion
  // delete it from 'running' (completedJobs 'delete'); any other missing row is lost.
  const deletedOnCompletion = `select a.job_id from ${s}.chaos_audit a where a.new_state = 'deleted' and a.old_state = 'running'`;
  const lost = await one(`
    select count(*) as n from ${s}.chaos_enqueued e left join ${s}.jobs j on j.id = e.job_id
    where (j.id is null and e.job_id not in (${deletedOnCompletion}))
      or j.state not in ('completed', 'dead', 'cancelled')`);
  // The schedule's jobs are the workers' own (each occurrence checked below), not the harness's.
  // … and so are the events' subscriber jobs (checkEvents, chaos/events.ts).
  const scheduledJobs = `select job_id from ${s}.chaos_schedule_runs union select job_id from ${s}.chaos_runtime_runs
    union select id from ${s}.jobs where kind in (${OWN_KINDS}) union select job_id from ${s}.event_deliveries`;
  const notOwn = `kind not in (${OWN_KINDS}, ${SUBSCRIBER_KINDS})`;
  const unexpected = await one(`
    select count(*) as n from (
      select j.id from ${s}.jobs j where j.state = 'completed'
      union all ${deletedOnCompletion}) c(id)
    where not exists (select 1 from ${s}.chaos_enqueued e where e.job_id = c.id)
      and c.id not in (${scheduledJobs})`);
  const occurrences = `select payload->>'at' as at, id from ${s}.jobs where kind = '${SCHEDULED_KIND}'
    union select occurrence, job_id from ${s}.chaos_schedule_runs`;
  const scheduleDuplicates = await one(`
    select count(*) as n from (select at from (${occurrences}) o group by at having count(distinct id) > 1) x`);
  const scheduled = await one(`select count(distinct at) as n from (${occurrences}) o`);
  // A claim legitimately replaces the token (and counts an attempt); every other write must
  // carry the token the row already had. Holder writes set lease_token to the token they
  // matched on, so a write made under a stale token shows up here as a token change.
  const staleWrites = await one(`
    select count(*) as n from ${s}.chaos_audit a
    where a.old_token is distinct from a.new_token
      and not (a.new_state = 'running' and a.new_attempt = a.old_attempt + 1)`);
  const dead = await one(`select count(*) as n from ${s}.jobs where state = 'dead' and ${notOwn}`);
  const completed = await one(`
    select (select count(*) from ${s}.jobs where state = 'completed' and ${notOwn})
      + (select count(*) from (${deletedOnCompletion}) d where d.job_id not in (${scheduledJobs})) as n`);
  const cancelled = await one(`select count(*) as n from ${s}.jobs where state = 'cancelled' and ${notOwn}`);
  const maxExecutions = await one(`
    select coalesce(max(c), 0) as n from (select count(*) as c from ${s}.chaos_executions group by job_id) x`);
  const reExecuted = await one(`
    select count(*) as n from (select job_id from ${s}.chaos_executions group by job_id having count(*) > 1) x`);
  // Every execution ran under a lease; that lease must have ended through a recorded
  // transition out of 'running' under its token: completed, retried, dead, released, or
  // taken over by a rescue after it expired (a dead or overrunning holder).
  const unexplainedExecutions = await one(`
    select count(*) as n from ${s}.chaos_executions x
    where not exists (
      select 1 from ${s}.chaos_audit a
      where a.job_id = x.job_id and a.old_token = x.lease_token and a.old_state = 'running'
        and (a.new_state <> 'running' or a.new_attempt = a.old_attempt + 1))`);
  const duplicateTokenExecutions = await one(`
    select count(*) as n from (
      select 1 from ${s}.chaos_executions group by job_id, lease_token having count(*) > 1) x`);
  const attemptAccountingErrors = await one(`
    select count(*) as n from ${s}.jobs
    where state = 'dead' and dead_reason in ('max_attempts', 'lease_expired') and attempt <> max_attempts`);
  const pauseViolations = await one(`
    select count(*) as n from ${s}.chaos_audit a
    join ${s}.chaos_enqueued e on e.job_id = a.job_id and e.queue = '${PAUSED_QUEUE}'
    join ${s}.chaos_pauses p on a.stmt_at > p.confirmed_at and a.stmt_at < coalesce(p.resume_sent_at, 'infinity')
    where a.new_state = 'running' and a.new_attempt = a.old_attempt + 1`);
  // First claim of each keyed job, in id order per key: never earlier than the one before it.
  const outOfOrder = await one(`
    select count(*) as n from (
      select e.ordering_key, e.job_id, min(a.at) as first_claim,
        lag(min(a.at)) over (partition by e.ordering_key order by e.job_id) as previous_claim
      from ${s}.chaos_enqueued e join ${s}.chaos_audit a on a.job_id = e.job_id
      where e.ordering_key is not null and a.old_state = 'queued' and a.new_state = 'running'
      group by e.ordering_key, e.job_id) c
    where c.first_claim < c.previous_claim`);
  // A claim of a keyed job while another job of its key held a lease that had not ended: the
  // claim's time against each other job's lease intervals (claim → the next transition out of it).
  const overlapping = await one(`
    with claims as (
      select a.job_id, e.ordering_key, a.at, a.new_token as token from ${s}.chaos_audit a
      join ${s}.chaos_enqueued e on e.job_id = a.job_id
      where e.ordering_key is not null and a.new_state = 'running' and a.new_attempt = a.old_attempt + 1),
    leases as (
      select c.job_id, c.ordering_key, c.at as from_at,
        (select min(x.at) from ${s}.chaos_audit x where x.job_id = c.job_id and x.old_token = c.token
           and x.at >= c.at and (x.new_state <> 'running' or x.new_token is distinct from c.token)) as to_at
      from claims c)
    select count(*) as n from claims c join leases l
      on l.ordering_key = c.ordering_key and l.job_id <> c.job_id and c.at > l.from_at and c.at < l.to_at`);
  const orderViolations = outOfOrder + overlapping;
  // A sweep over the limited queue's lease intervals: +1 at each claim, -1 at each end (ends first
  // at equal times); a claim that brings the running count past the limit is a violation.
  const limitViolations = await one(`
    with claims as (
      select a.job_id, e.concurrency_key as ck, a.at, a.new_token as token from ${s}.chaos_audit a
      join ${s}.chaos_enqueued e on e.job_id = a.job_id
      where e.queue = '${LIMITED.queue}' and a.new_state = 'running' and a.new_attempt = a.old_attempt + 1),
    leases as (
      select c.ck, c.at as from_at,
        (select min(x.at) from ${s}.chaos_audit x where x.job_id = c.job_id and x.old_token = c.token
           and x.at >= c.at and (x.new_state <> 'running' or x.new_token is distinct from c.token)) as to_at
      from claims c),
    events as (
      select from_at as t, 1 as d, ck from leases
      union all select to_at, -1, ck from leases where to_at is not null),
    live as (
      select d, sum(d) over (order by t, d rows unbounded preceding) as in_queue,
        sum(d) over (partition by ck order by t, d rows unbounded preceding) as in_key
      from events)
    select count(*) as n from live
    where d = 1 and (in_queue > ${LIMITED.maxRunning} or in_key > ${LIMITED.perKey})`);
  // When each parent first ended: completed (or deleted on completion), and ended by any path.
  const startedEarly = await one(`
    with parents as (
      select distinct p.id from ${s}.chaos_enqueued e cross join lateral unnest(e.parents) as p(id)
      where e.parents is not null),
    ends as (
      select a.job_id,
        min(a.at) filter (where a.new_state in ('completed', 'deleted')) as completed_at,
        min(a.at) filter (where a.new_state in ('completed', 'deleted', 'dead', 'cancelled')) as ended_at
      from ${s}.chaos_audit a join parents p on p.id = a.job_id
      where a.old_state = 'running'
      group by a.job_id)
    select count(*) as n from ${s}.chaos_enqueued e
    join ${s}.chaos_audit a on a.job_id = e.job_id and a.new_state = 'running' and a.new_attempt = a.old_attempt + 1
    cross join lateral unnest(e.parents) as p(id)
    left join ends x on x.job_id = p.id
    where e.parents is not null
      and coalesce(case when e.run_anyway then x.ended_at else x.completed_at end, 'infinity') > a.at`);
  const notCancelled = await one(`
    select count(*) as n from ${s}.chaos_enqueued e join ${s}.jobs j on j.id = e.job_id
    where e.parents is not null and not e.run_anyway
      and exists (select 1 from ${s}.jobs p where p.id = any(e.parents) and p.state in ('dead', 'cancelled'))
      and not (j.state = 'cancelled' and j.dead_reason = 'dependency_failed')`);
  const dependencyViolations = startedEarly + notCancelled;
  const live = await liveChecks(one, s);
  return {
    ...live,
    ...(await checkSteps(pool, schema)),
    dependencyViolations,
    enqueued,
    lost,
    unexpected,
    staleWrites,
    dead,
    completed,
    cancelled,
    maxExecutions,
    reExecuted,
    unexplainedExecutions,
    duplicateTokenExecutions,
    attemptAccountingErrors,
    pauseViolations,
    orderViolations,
    limitViolations,
    scheduleDuplicates,
    scheduled,
  };
}

/** The live enqueues' and replays' checks (zero in a schema made before the tables existed). */
async function liveChecks(one: (text: string) => Promise<number>, s: string) {
  const exists = await one(
    `select count(*) as n from pg_tables where schemaname = '${s.slice(1, -1)}' and tablename = 'chaos_replays'`,
  );
  if (exists === 0) return { liveEnqueued: 0, enqueueDuplicates: 0, replayed: 0, replayDuplicates: 0 };
  return {
    liveEnqueued: await one(`select count(*) as n from ${s}.chaos_enqueued where live`),
    enqueueDuplicates: await one(`
      select count(*) as n from (
        select j.kind, j.dedupe_key from ${s}.jobs j
        where j.dedupe_key like 'live-%' group by j.kind, j.dedupe_key having count(*) > 1) x`),
    replayed: await one(`select count(*) as n from ${s}.chaos_replays`),
    replayDuplicates: await one(`
      select count(*) as n from ${s}.chaos_replays r join ${s}.jobs j on j.id = r.job_id where j.replay_count > 1`),
  };
}

export function runFailed(result: CheckResult): boolean {
  return (
    result.enqueueDuplicates > 0 ||
    result.replayDuplicates > 0 ||
    result.lost > 0 ||
    result.staleWrites > 0 ||
    result.unexpected > 0 ||
    result.unexplainedExecutions > 0 ||
    result.duplicateTokenExecutions > 0 ||
    result.attemptAccountingErrors > 0 ||
    result.pauseViolations > 0 ||
    result.orderViolations > 0 ||
    result.limitViolations > 0 ||
    result.scheduleDuplicates > 0 ||
    result.dependencyViolations > 0 ||
    result.steppedCompleted < result.stepped ||
    result.stepReruns > 0 ||
    result.stepEffectErrors > 0 ||
    result.signalsLost > 0
  );
}
