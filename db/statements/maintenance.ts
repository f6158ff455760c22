import { sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { appendCapped, jobsRef, nowExpr } from './common.js';

/** Moves queued jobs whose deadline passed to the DLQ (JobExpireDeadlines), at most `limit`. */
export async function expireDeadlines(db: Executor, schema: string, limit = 1000, now?: Date): Promise<string[]> {
  const jobs = jobsRef(schema);
  const clockNow = sql`(select now from clock)`;
  const error = sql`jsonb_build_object('class', 'deadline_exceeded',
    'message', 'the job''s deadline passed before it could run', 'attempt', j.attempt, 'at', ${clockNow})`;
  // "now" is read once in the clock CTE: compared with clock_timestamp() itself (volatile, so
  // never an index key) the scan would walk every queued deadline instead of only the due ones.
  const rows = await queryRows<{ id: string }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    expired as (
      select id from ${jobs}
      where state = 'queued' and deadline is not null and deadline <= ${clockNow}
      order by deadline limit ${limit}
      for update skip locked
    )
    update ${jobs} j set state = 'dead', dead_reason = 'deadline_exceeded', finished_at = ${clockNow},
      last_error = ${error}, errors = ${appendCapped(sql`j.errors`, error)}, updated_at = ${clockNow}
    where j.id = any(array(select id from expired))
    returning j.id::text as id`,
    schema,
  );
  return rows.map((r) => r.id);
}

/**
 * Deletes up to `limit` finished jobs in `state` that finished before `olderThanMs` ago
 * (JobDeleteFinishedMany). Bounded so a prune never holds a long transaction; callers loop.
 */
export async function pruneFinished(
  db: Executor,
  schema: string,
  state: 'completed' | 'dead' | 'cancelled',
  olderThanMs: number,
  limit: number,
  now?: Date,
): Promise<number> {
  const jobs = jobsRef(schema);
  // "now" read once (see expireDeadlines): the cutoff is then an index condition, so a prune
  // with nothing old to delete reads a few index pages, not every finished row.
  const rows = await queryRows<{ n: number }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    doomed as (
      select id from ${jobs}
      where state = ${state} and finished_at is not null
        and finished_at < (select now from clock) - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      order by finished_at
      limit ${limit}
      for update skip locked
    ), deleted as (
      delete from ${jobs} j where j.id = any(array(select id from doomed)) returning j.id
    ), steps as (
      -- Their durable steps go with them (job_steps has no foreign key: see db/schema.ts).
      delete from ${sql.identifier(schema)}.job_steps s using deleted d where s.job_id = d.id returning 1
    )
    select count(*)::int as n from deleted where (select count(*) from steps) >= 0`,
    schema,
  );
  return rows[0]?.n ?? 0;
}

/**
 * Tidies the per-minute completion counts (CompletedCountsCompact): deletes those older than
 * `olderThanMs`, and rolls each finished minute's rows (one per settle statement) up into one
 * row per queue and kind. Writers only ever add rows for the current minute, and a late one
 * for a rolled-up minute is simply summed with it by the stats (and by the next roll-up).
 */
export async function compactCompletedCounts(
  db: Executor,
  schema: string,
  olderThanMs: number,
  now?: Date,
): Promise<{ pruned: number; rolledUp: number }> {
  const counts = sql`${sql.identifier(schema)}.completed_counts`;
  const rows = await queryRows<{ pruned: number; rolled_up: number }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
    pruned as (
      delete from ${counts}
      where minute < (select now from clock) - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      returning 1
    ),
    finished as (
      delete from ${counts}
      where minute < date_trunc('minute', (select now from clock)) - interval '1 minute'
        and minute >= (select now from clock) - ${Math.max(0, Math.round(olderThanMs))} * interval '1 millisecond'
      returning minute, queue, kind, completed
    ),
    rolled as (
      insert into ${counts} (minute, queue, kind, completed)
      select minute, queue, kind, sum(completed) from finished group by minute, queue, kind
      returning 1
    )
    select (select count(*)::int from pruned) as pruned, (select count(*)::int from rolled) as rolled_up`,
    schema,
  );
  return { pruned: rows[0]?.pruned ?? 0, rolledUp: rows[0]?.rolled_up ?? 0 };
}
