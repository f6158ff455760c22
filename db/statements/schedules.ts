import { sql } from 'drizzle-orm';
import type { JobInsertRow } from '../../base/rows.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, toDate } from './common.js';
import { type InsertRow, insertJobsStatement, readInsertOutcomes } from './enqueue.js';

/** A schedule as the database remembers it. */
export interface ScheduleRecord {
  name: string;
  cron: string;
  timezone: string;
  kind: string;
  /** The newest occurrence handled: enqueued, or skipped as missed. */
  lastOccurrence: Date;
  /** The job the last enqueued occurrence became, and when. */
  lastJobId: string | null;
  lastEnqueuedAt: Date | null;
  createdAt: Date;
}

const schedulesRef = (schema: string) => sql`${sql.identifier(schema)}.schedules`;

/**
 * Records the code's schedules (ScheduleSync): a new one starts from now — its first occurrence is
 * the next one — and a changed definition is updated in place. Returns each one's last occurrence
 * and the database's clock. A schedule another tick is recording at this moment is absent (that
 * tick handles it).
 */
export async function syncSchedules(
  db: Executor,
  schema: string,
  defs: readonly { name: string; cron: string; timezone: string; kind: string }[],
  now?: Date,
): Promise<{ now: Date; last: Map<string, Date> }> {
  const col = (f: (d: (typeof defs)[number]) => string) => sql.param(defs.map(f));
  const rows = await queryRows<{ name: string | null; last_ms: number | null; now_ms: number }>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now),
      d as (select * from unnest(${col((d) => d.name)}::text[], ${col((d) => d.cron)}::text[],
        ${col((d) => d.timezone)}::text[], ${col((d) => d.kind)}::text[]) as d(name, cron, timezone, kind)),
      ins as (
        insert into ${schedulesRef(schema)} as s (name, cron, timezone, kind, last_occurrence, created_at, updated_at)
        select d.name, d.cron, d.timezone, d.kind, date_trunc('milliseconds', c.now), c.now, c.now from d cross join clock c
        on conflict (name) do update set cron = excluded.cron, timezone = excluded.timezone, kind = excluded.kind,
          updated_at = excluded.updated_at
          where (s.cron, s.timezone, s.kind) is distinct from (excluded.cron, excluded.timezone, excluded.kind)
        returning s.name, s.last_occurrence
      ),
      found as (
        select name, last_occurrence from ins
        union all
        select s.name, s.last_occurrence from ${schedulesRef(schema)} s
        where s.name in (select name from d) and s.name not in (select name from ins)
      )
      select f.name, ${epochMs(sql`f.last_occurrence`)} as last_ms, ${epochMs(sql`(select now from clock)`)} as now_ms
      from (select * from found union all select null, null where not exists (select 1 from found)) f`,
    schema,
  );
  const last = new Map<string, Date>();
  for (const r of rows) if (r.name !== null) last.set(r.name, toDate(r.last_ms) as Date);
  return { now: new Date(Number(rows[0]?.now_ms)), last };
}

/**
 * Moves a schedule's last occurrence from `expected` to `last` and enqueues `rows` (its due
 * occurrences), in ONE statement (ScheduleFire): a compare-and-set on the schedule's row, and the
 * insert only when it matched. Two ticks that read the same last occurrence: the second waits for
 * the first's row lock, then finds the row moved and inserts nothing. Returns whether it fired and
 * the jobs' ids (null for an occurrence whose dedupe key a live job already holds).
 */
export async function fireSchedule(
  db: Executor,
  schema: string,
  request: { name: string; expected: Date; last: Date; rows: readonly JobInsertRow[] },
): Promise<{ fired: boolean; ids: (string | null)[] }> {
  const moved = sql`moved as (
      update ${schedulesRef(schema)} s set last_occurrence = ${request.last.toISOString()}::timestamptz,
        last_enqueued_at = case when ${request.rows.length} > 0 then clock_timestamp() else s.last_enqueued_at end,
        updated_at = clock_timestamp()
      where s.name = ${request.name}
        -- JavaScript reads the time in milliseconds: compare in milliseconds (an operator may have
        -- written a time with microseconds).
        and date_trunc('milliseconds', s.last_occurrence) = ${request.expected.toISOString()}::timestamptz
      returning 1
    )`;
  if (request.rows.length === 0) {
    const rows = await queryRows<{ n: number }>(db, sql`with ${moved} select count(*)::int as n from moved`, schema);
    return { fired: (rows[0]?.n ?? 0) > 0, ids: [] };
  }
  const outcomes = readInsertOutcomes(
    await queryRows<InsertRow>(
      db,
      insertJobsStatement(schema, request.rows, { ctes: moved, condition: sql`exists (select 1 from moved)` }),
      schema,
    ),
  );
  if (outcomes.length === 0) return { fired: false, ids: [] };
  const ids = outcomes.map((o) => o.id);
  const lastId = ids.filter((id) => id !== null).at(-1);
  if (lastId) {
    await queryRows(
      db,
      sql`update ${schedulesRef(schema)} set last_job_id = ${lastId}::bigint where name = ${request.name}
        and last_occurrence = ${request.last.toISOString()}::timestamptz returning 1`,
      schema,
    );
  }
  return { fired: true, ids };
}

type Row = {
  name: string;
  cron: string;
  timezone: string;
  kind: string;
  last_ms: number;
  last_job_id: string | null;
  last_enqueued_ms: number | null;
  created_ms: number;
};

/** Every schedule the database remembers (ScheduleList), by name. */
export async function listScheduleRecords(db: Executor, schema: string): Promise<ScheduleRecord[]> {
  const rows = await queryRows<Row>(
    db,
    sql`select name, cron, timezone, kind, ${epochMs(sql`last_occurrence`)} as last_ms, last_job_id::text as last_job_id,
        ${epochMs(sql`last_enqueued_at`)} as last_enqueued_ms, ${epochMs(sql`created_at`)} as created_ms
      from ${schedulesRef(schema)} order by name`,
    schema,
  );
  return rows.map((r) => ({
    name: r.name,
    cron: r.cron,
    timezone: r.timezone,
    kind: r.kind,
    lastOccurrence: toDate(r.last_ms) as Date,
    lastJobId: r.last_job_id,
    lastEnqueuedAt: toDate(r.last_enqueued_ms),
    createdAt: toDate(r.created_ms) as Date,
  }));
}
