import { type SQL, sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { holdsKey, jobsRef, nowExpr } from './common.js';

/**
 * Releases the next job of each ordering key whose turn has come (OrderingRelease): the oldest
 * parked follower (queued, run_at = infinity) of a key with no other live job — none running, none
 * queued to run, no earlier dead one holding the key. Its run_at becomes now: the claim takes it.
 * Called for the keys of jobs that just ended, and for every key at the start of an invocation and
 * by maintenance (a release missed when a follower's enqueue committed beside its predecessor's
 * end). Two releases of one key meet on the row: the second finds it released and does nothing.
 */
export async function releaseParked(
  db: Executor,
  schema: string,
  request: { keys?: readonly string[]; limit: number; now?: Date },
): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now), ${releaseParkedCtes(schema, request)}
    select id::text as id from released`,
    schema,
  );
  return rows.map((r) => r.id);
}

/**
 * The CTEs `parked_heads` and `released` (RETURNING id) of releaseParked, for use after a `clock`
 * CTE: buryDoomed runs them in its statement, so an invocation's start costs no extra round trip.
 */
export function releaseParkedCtes(schema: string, request: { keys?: readonly string[]; limit: number }): SQL {
  const jobs = jobsRef(schema);
  const only = request.keys ? sql`and p.ordering_key = any(${sql.param(request.keys)}::text[])` : sql``;
  return sql`parked_heads as (
      select distinct on (p.ordering_key) p.id, p.ordering_key from ${jobs} p
      where p.ordering_key is not null and p.state = 'queued' and p.run_at = 'infinity' ${only}
      order by p.ordering_key, p.id
      limit ${Math.max(1, Math.round(request.limit))}
    ),
    released as (${releaseHeads(jobs, 'parked_heads', sql``)})`;
}

/**
 * CTEs (`ended_keys`, `next_heads`, `released_next`, after a `clock` CTE) that release the next
 * job of each ordering key whose job the same statement ended: `ended` selects (id, state) of the
 * rows it changed — completed, cancelled, or dead without holding the key end the key's turn (a
 * retried job, back in `queued`, does not). Those rows still look live to the statement's snapshot,
 * so the check that no other job of the key is live leaves them out by id. `keys`, when given,
 * narrows the look-up to those keys.
 */
export function releaseAfterCtes(schema: string, ended: SQL, keys?: readonly string[]): SQL {
  const jobs = jobsRef(schema);
  const only = keys ? sql`and j.ordering_key = any(${sql.param(keys)}::text[])` : sql`and j.ordering_key is not null`;
  return sql`ended_rows as (${ended}),
    ended_keys as (
      select distinct j.ordering_key from ended_rows e join ${jobs} j on j.id = e.id
      where (e.state in ('completed', 'cancelled') or (e.state = 'dead' and not j.ordering_hold)) ${only}
    ),
    next_heads as (
      -- Each key's oldest parked follower: one entry of jobs_parked_idx per key.
      select p.id, k.ordering_key from ended_keys k
      cross join lateral (
        select p.id from ${jobs} p
        where p.ordering_key = k.ordering_key and p.state = 'queued' and p.run_at = 'infinity'
        order by p.id limit 1
      ) p
    ),
    released_next as (${releaseHeads(
      jobs,
      'next_heads',
      sql`and o.id not in (select e.id from ended_rows e where e.state <> 'queued')`,
    )})`;
}

/**
 * Releases the parked heads in the CTE `heads` (id, ordering_key) whose key has no other live job:
 * none running, none queued to run, no earlier dead one holding the key. `ignore` leaves rows out
 * of that check (the ones the same statement ended, still live to its snapshot).
 */
function releaseHeads(jobs: SQL, heads: string, ignore: SQL): SQL {
  return sql`update ${jobs} w set run_at = (select now from clock), updated_at = (select now from clock)
      from ${sql.raw(heads)} h
      where w.id = h.id and w.state = 'queued' and w.run_at = 'infinity'
        and not exists (
          -- Any other holder of the key (jobs_ordering_blockers_idx): queued to run or running, or an
          -- earlier dead one that holds it.
          select 1 from ${jobs} o
          where o.ordering_key = h.ordering_key and o.id <> h.id and ${holdsKey('o')} ${ignore}
            and (o.dead_reason is null or o.id < h.id))
      returning w.id`;
}
