import { sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { jobsRef, nowExpr } from './common.js';

/**
 * Minutes are rolled up once this long has passed since they closed: a settle statement writes
 * finished_at from its own clock and commits a moment later, and a row committed into a minute
 * already rolled up would be missed.
 */
const SETTLE_MINUTES = 2;

/**
 * Rolls the minutes that closed since the last rollup into activity_rollups (ActivityRollUp): jobs
 * finished per minute, queue and kind, from the jobs table (jobs_finished_idx) and the counts of
 * deleted completions. One caller at a time (a tried advisory lock: another caller skips); a minute
 * is written once. The first call reads every finished row the table keeps; later ones only the
 * minutes since. Returns the rows written.
 */
export async function rollUpActivity(db: Executor, schema: string, request: { now?: Date } = {}): Promise<number> {
  const jobs = jobsRef(schema);
  const rollups = sql`${sql.identifier(schema)}.activity_rollups`;
  const counts = sql`${sql.identifier(schema)}.completed_counts`;
  const oldest = (state: string) =>
    sql`(select min(j.finished_at) from ${jobs} j where j.state = ${state} and j.finished_at is not null)`;
  const [row] = await queryRows<{ n: number }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    turn as (select pg_try_advisory_xact_lock(hashtext(${`skiplock:rollup:${schema}`})) as mine),
    bounds as (
      select coalesce(
          (select max(r.minute) + interval '1 minute' from ${rollups} r),
          date_trunc('minute', least(${oldest('completed')}, ${oldest('dead')}, ${oldest('cancelled')},
            (select min(c.minute) from ${counts} c)))
        ) as since,
        date_trunc('minute', (select now from clock)) - ${SETTLE_MINUTES}::int * interval '1 minute' as until
    ),
    fresh as (
      select date_trunc('minute', j.finished_at) as minute, j.queue, j.kind,
        count(*) filter (where j.state = 'completed') as completed,
        count(*) filter (where j.state = 'dead') as dead,
        count(*) filter (where j.state = 'cancelled') as cancelled
      from ${jobs} j
      where (select mine from turn) and j.state in ('completed', 'dead', 'cancelled') and j.finished_at is not null
        and j.finished_at >= (select since from bounds) and j.finished_at < (select until from bounds)
      group by 1, 2, 3
      union all
      select c.minute, c.queue, c.kind, sum(c.completed), 0, 0
      from ${counts} c
      where (select mine from turn) and c.minute >= (select since from bounds) and c.minute < (select until from bounds)
      group by 1, 2, 3
    ),
    written as (
      insert into ${rollups} (minute, queue, kind, completed, dead, cancelled)
      select minute, queue, kind, sum(completed), sum(dead), sum(cancelled) from fresh group by 1, 2, 3
      on conflict (minute, queue, kind) do nothing
      returning 1
    )
    select count(*)::int as n from written`,
    schema,
  );
  return row?.n ?? 0;
}

/** Deletes the rollups of minutes older than `keepMs` (maintenance). Returns how many. */
export async function pruneRollups(db: Executor, schema: string, keepMs: number, now?: Date): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    db,
    sql`with gone as (
      delete from ${sql.identifier(schema)}.activity_rollups
      where minute < ${nowExpr(now)} - ${keepMs}::float8 * interval '1 millisecond'
      returning 1
    )
    select count(*)::int as n from gone`,
    schema,
  );
  return row?.n ?? 0;
}
