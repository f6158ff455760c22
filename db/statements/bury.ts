import { type SQL, sql } from 'drizzle-orm';
import type { ClaimDeadJob } from '../../base/rows.js';
import { queryHotRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { appendCapped, jobsRef, lapsedLeases, lapsedWindow, leaseRanOut, nowExpr } from './common.js';
import { type SubscriptionSpec, syncSubscriptionsCte } from './events.js';
import { releaseAfterCtes, releaseParkedCtes } from './ordering.js';

/**
 * Keys the sweep at an invocation's start looks at for a missed release: the ones with the oldest
 * parked jobs first. Every parked follower whose key is busy is looked at too, so keep it small.
 */
const SWEEP_KEYS = 50;

/**
 * Moves to the DLQ the rows a claim must never run (JobBuryDoomedMany): queued jobs past their
 * deadline (deadline_exceeded) and running jobs whose lease expired with no attempt left, or
 * past their deadline (lease_expired / deadline_exceeded). Each part reads only its own
 * partial index; cheap enough to run at the start of every invocation.
 */
export async function buryDoomed(
  db: Executor,
  schema: string,
  request: Parameters<typeof sweepDoomed>[2],
): Promise<ClaimDeadJob[]> {
  return (await sweepDoomed(db, schema, request)).dead;
}

/**
 * buryDoomed, and with `probeSchedules` whether a run-time schedule is due (unclaimed, next_run_at
 * ≤ now) in the same statement: an invocation learns it has a tick to run at no extra round trip,
 * and an app with no schedule due sends no schedule statement at all. The probe reads the first
 * entries of runtime_schedules_due_idx.
 */
export async function sweepDoomed(
  db: Executor,
  schema: string,
  request: {
    kinds: readonly string[];
    queues?: readonly string[];
    limit: number;
    now?: Date;
    /**
     * Record this worker as serving its queues and kinds (WorkerSeen), in the same statement: with
     * the time its invocation has for attempts and its kinds whose timeoutMs is longer (never claimed).
     */
    served?: {
      /**
       * false: the statement carries the record but writes nothing (a warm instance records itself
       * once a minute): its text, and so its kept plan, is the same either way. @defaultValue true
       */
      record?: boolean;
      name: string;
      budgetMs?: number;
      unfitKinds?: readonly string[];
      /** Its subscribers' subscriptions, written in the same statement (SubscriptionSync). */
      subscriptions?: readonly SubscriptionSpec[];
    };
    probeSchedules?: boolean;
    /**
     * Also say whether a claim could find anything (`mayClaim`): a queued job of these kinds and
     * queues whose run_at has come, a lapsed lease, or an ordering key this statement released. A
     * superset of what a claim takes (pauses, limits, parents and turns are not looked at): false
     * means the claim that would follow finds nothing, and the invocation need not send it.
     */
    probeReady?: boolean;
    /**
     * false: the sweep for a worker that has seen no job with an ordering key. It leaves out the
     * release of ordering keys (its CTEs cost a new connection ~3 ms of server CPU to plan, every
     * HTTP request ~1.5 ms) and leaves doomed jobs that have a key to the full sweep; `ordered` says
     * whether any job with a key is unfinished, so that the full sweep follows. @defaultValue true
     */
    ordering?: boolean;
    /** Also say `ordered` with the full sweep (the sweep without `ordering` always does). */
    probeOrdered?: boolean;
  },
): Promise<{ dead: ClaimDeadJob[]; schedulesDue: boolean; mayClaim: boolean; ordered: boolean }> {
  const ordering = request.ordering !== false;
  const probeOrdered = !ordering || request.probeOrdered === true;
  const jobs = jobsRef(schema);
  const now = sql`(select now from clock)`;
  const kindFilter = sql`j.kind = any(${sql.param(request.kinds)}::text[]) ${
    request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``
  }${ordering ? sql`` : sql` and j.ordering_key is null`}`;
  const rescueError = sql`jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', ${now})`;
  const error = sql`(case when j.deadline <= ${now}
    then jsonb_build_object('class', 'deadline_exceeded',
      'message', 'the job''s deadline passed before it could run', 'attempt', j.attempt, 'at', ${now})
    else ${rescueError} end)`;
  // Sent as a hot statement: on pg a named statement whose plan the connection keeps, so a warm
  // instance's invocations do not each plan it again (~2.3 of its ~3.2 ms on the server). Its plan
  // is bounded by its LIMITs and partial indexes whatever the backlog (cheap: no JIT setting).
  const rows = await queryHotRows<{
    id: string;
    kind: string;
    queue: string;
    attempt: number;
    dead_reason: string;
    correlation_id: string | null;
    schedules_due?: boolean | null;
    work_ready?: boolean | null;
    ordered?: boolean | null;
  }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    ${
      ordering
        ? sql`-- Ordering keys whose release was missed (a follower committed beside its predecessor's end):
    -- their next jobs become claimable. The keys of the rows this statement buries are released
    -- below (released_next).
    ${releaseParkedCtes(schema, { limit: SWEEP_KEYS })},`
        : sql``
    }
    by_deadline as (
      select j.id from ${jobs} j
      where j.state = 'queued' and j.deadline is not null and j.deadline <= ${now} and ${kindFilter}
      limit ${request.limit}
      for update skip locked
    ),
    by_lease as (
      -- Candidates from lapsed_leases, as the claim's rescue (see the function).
      select j.id from ${jobs} j
      where j.id = any(${lapsedLeases(schema, now, request.kinds, lapsedWindow(request.limit))})
        and j.state = 'running' and ${leaseRanOut(now)}
        and (j.attempt >= j.max_attempts or j.deadline <= ${now}) and ${kindFilter}
      limit ${request.limit}
      for update skip locked
    ),
    buried as (
    update ${jobs} j set
      state = 'dead',
      dead_reason = case when j.deadline <= ${now} then 'deadline_exceeded' else 'lease_expired' end,
      finished_at = ${now},
      lease_expires_at = null,
      last_error = ${error},
      errors = ${appendCapped(sql`j.errors`, error)},
      updated_at = ${now}
    where j.id = any(array(select id from by_deadline union all select id from by_lease))
    returning j.id, j.kind, j.queue, j.attempt, j.dead_reason, j.correlation_id
    )${
      ordering
        ? sql`,
    ${releaseAfterCtes(schema, sql`select id, 'dead'::text as state from buried`)}`
        : sql``
    }${request.served ? workerSeenCte(schema, request.served, request.kinds, request.queues) : sql``}${
      request.served?.subscriptions?.length && request.served.record !== false
        ? sql`, ${syncSubscriptionsCte(schema, 'subscriptions_seen', request.served.subscriptions, now)}`
        : sql``
    }
    ${
      request.probeSchedules || request.probeReady || probeOrdered
        ? sql`select b.id::text as id, b.kind, b.queue, b.attempt, b.dead_reason, b.correlation_id,
        p.due as schedules_due, p.work_ready, p.ordered
      from (select ${
        request.probeSchedules
          ? sql`(select s.next_run_at from ${sql.identifier(schema)}.runtime_schedules s
        -- Ordered and limited, so that the plan walks the index from its start whatever the
        -- estimate for a clock known only when it runs (a plain exists may scan the table).
        where s.next_run_at <= ${now} and (s.claimed_until is null or s.claimed_until <= ${now})
        order by s.next_run_at limit 1) is not null`
          : sql`null::boolean`
      } as due, ${request.probeReady ? readyProbe(schema, request.kinds, request.queues, now, ordering) : sql`null::boolean`} as work_ready,
        ${probeOrdered ? orderedProbe(schema) : sql`null::boolean`} as ordered) p
      left join buried b on true`
        : sql`select id::text as id, kind, queue, attempt, dead_reason, correlation_id from buried`
    }`,
    schema,
    { cheap: true },
  );
  const schedulesDue = rows.some((r) => r.schedules_due === true);
  const mayClaim = !request.probeReady || rows.length === 0 || rows.some((r) => r.work_ready !== false);
  const ordered = rows.some((r) => r.ordered === true);
  const dead = rows
    .filter((r) => r.id !== null)
    .map((r) => ({
      id: r.id,
      kind: r.kind,
      queue: r.queue,
      attempt: r.attempt,
      reason: r.dead_reason as ClaimDeadJob['reason'],
      correlationId: r.correlation_id,
    }));
  return { dead, schedulesDue, mayClaim, ordered };
}

/**
 * Whether any job with an ordering key is unfinished (the full sweep releases keys and buries keyed
 * jobs): the first unfinished holder in jobs_ordering_blockers_idx (read in its order, as
 * claim_guard does) or the first parked follower in jobs_parked_idx. Each probe stops at its first row.
 */
function orderedProbe(schema: string): SQL {
  const jobs = jobsRef(schema);
  return sql`((select true from ${jobs} o
          where o.ordering_key is not null and o.finished_at is null and o.run_at <> 'infinity'
          order by o.ordering_key, o.id limit 1) is not null
        or (select true from ${jobs} o
          where o.ordering_key is not null and o.state = 'queued' and o.run_at = 'infinity'
          order by o.ordering_key, o.id limit 1) is not null)`;
}

/**
 * Whether a claim of `kinds` (in `queues`) could find a job: one queued whose run_at has come
 * (through the claim index: at most the rows the claim itself would walk), any queued job with a
 * concurrency key (the keyed index does not lead with run_at: a walk past keyed jobs not yet due
 * could grow with their number), a lapsed lease (a rescue), or an ordering key's next job this
 * statement released (its snapshot does not see it yet). Each probe stops at its first row.
 */
function readyProbe(
  schema: string,
  kinds: readonly string[],
  queues: readonly string[] | undefined,
  now: SQL,
  ordering: boolean,
): SQL {
  const jobs = jobsRef(schema);
  const mine = sql`j.kind = any(${sql.param(kinds)}::text[]) ${
    queues ? sql`and j.queue = any(${sql.param(queues)}::text[])` : sql``
  }`;
  return sql`(exists (select 1 from ${jobs} j
          where j.state = 'queued' and j.run_at <= ${now} and ${mine} and j.concurrency_key is null)
        or exists (select 1 from ${jobs} j where j.state = 'queued' and ${mine} and j.concurrency_key is not null)
        or cardinality(${lapsedLeases(schema, now, kinds, 1)}) > 0${
          ordering
            ? sql`
        or exists (select 1 from released) or exists (select 1 from released_next)`
            : sql``
        })`;
}

/**
 * The worker's row in `workers` moved to now (a data-modifying CTE: it runs though nothing reads it),
 * unless `record` is false. One row per worker name and set of queues and kinds, named by their md5;
 * its budget and unfit kinds are those of its latest invocation (a new function timeout shows at the
 * next record).
 */
function workerSeenCte(
  schema: string,
  worker: NonNullable<Parameters<typeof buryDoomed>[2]['served']>,
  kinds: readonly string[],
  queues: readonly string[] | undefined,
) {
  const sortedKinds = [...kinds].sort();
  const sortedQueues = queues ? [...queues].sort() : null;
  const served = JSON.stringify([sortedQueues, sortedKinds]);
  const budgetMs =
    worker.budgetMs === undefined ? null : Math.max(0, Math.min(2_147_483_647, Math.round(worker.budgetMs)));
  const unfit = worker.unfitKinds === undefined ? null : sql.param([...worker.unfitKinds].sort());
  return sql`, worker_seen as (
      insert into ${sql.identifier(schema)}.workers (name, served, queues, kinds, seen_at, budget_ms, unfit_kinds)
      select ${worker.name}, md5(${served}), ${sortedQueues === null ? null : sql.param(sortedQueues)}::text[],
        ${sql.param(sortedKinds)}::text[], (select now from clock), ${budgetMs}::int, ${unfit}::text[]
      where ${worker.record !== false}::boolean
      on conflict (name, served) do update
        set seen_at = excluded.seen_at, budget_ms = excluded.budget_ms, unfit_kinds = excluded.unfit_kinds
      returning 1
    )`;
}
