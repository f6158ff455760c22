import { type SQL, sql } from 'drizzle-orm';
import type { AnyPgDatabase } from '../connect.js';
import { queryRows } from '../execute.js';
import { jobsRef, nowExpr } from './common.js';

/**
 * Releases the next job of each ordering key whose turn has come (OrderingRelease): the oldest
 * parked follower (queued, run_at = infinity) of a key with no other live job — none running, none
 * queued to run, no earlier dead one holding the key. Its run_at becomes now: the claim takes it.
 * Called for the keys of jobs that just ended, and for every key at the start of an invocation and
 * by maintenance (a release missed when a follower's enqueue committed beside its predecessor's
 * end). Two releases of one key meet on the row: the second finds it released and does nothing.
 */
export async function releaseParked(
  db: AnyPgDatabase,
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
    released as (
      update ${jobs} j set run_at = (select now from clock), updated_at = (select now from clock)
      from parked_heads h
      where j.id = h.id and j.state = 'queued' and j.run_at = 'infinity'
        and not exists (
          select 1 from ${jobs} o
          where o.ordering_key = h.ordering_key and o.id <> h.id and o.state in ('queued', 'running', 'dead')
            and ((o.state = 'queued' and o.run_at <> 'infinity') or o.state = 'running'
              or (o.state = 'dead' and o.ordering_hold and o.id < h.id)))
      returning j.id
    )`;
}
