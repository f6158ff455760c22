import { type SQL, sql } from 'drizzle-orm';
import type { JobInsertRow } from '../../base/rows.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, toDate } from './common.js';
import { type InsertRow, insertJobsStatement, readInsertOutcomes } from './enqueue.js';

/**
 * Run-time schedules (`runtime_schedules`): rows the app writes, ticked by every worker. Every
 * statement here stands alone (no interactive transaction), so each works inside the caller's
 * transaction, in a neon-http batch, or on its own over any driver.
 */

/** A run-time schedule's definition as the statements write it (checked and resolved by core). */
export interface RuntimeScheduleInput {
  key: string;
  kind: string;
  cron: string | null;
  interval_ms: number | null;
  timezone: string;
  /** The validated payload as JSON text. */
  payload_json: string;
  queue: string;
  job_options: StoredJobOptions;
  start_at: string | null;
  end_at: string | null;
  missed: string;
  late_after_ms: number;
  set_id: string | null;
  /**
   * A cron schedule's occurrences around the caller's clock (ISO), from which the statement picks
   * the first after the database's clock: croner runs in JavaScript, the clock that decides is
   * Postgres's. Empty for an interval schedule (computed in SQL from its anchor).
   */
  candidates: string[];
}

/** The options each occurrence's job is written with (the kind's defaults already applied). */
export interface StoredJobOptions {
  priority: number;
  max_attempts: number;
  /** The job's deadline, this long after its occurrence; null for none. */
  deadline_ms: number | null;
  correlation_id: string | null;
  ordering_key: string | null;
  ordering_hold: boolean;
  concurrency_key: string | null;
  destination: string | null;
}

/** A run-time schedule as the database holds it. */
export interface RuntimeScheduleRecord {
  key: string;
  kind: string;
  cron: string | null;
  intervalMs: number | null;
  timezone: string;
  payload: unknown;
  queue: string;
  jobOptions: StoredJobOptions;
  startAt: Date | null;
  endAt: Date | null;
  missed: string;
  lateAfterMs: number;
  setId: string | null;
  pausedAt: Date | null;
  nextRunAt: Date | null;
  claimedUntil: Date | null;
  lastOccurrence: Date | null;
  lastEnqueuedAt: Date | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

type RecordRow = {
  key: string;
  kind: string;
  cron: string | null;
  interval_ms: string | number | null;
  timezone: string;
  payload: unknown;
  queue: string;
  job_options: StoredJobOptions;
  start_ms: number | null;
  end_ms: number | null;
  missed: string;
  late_after_ms: number;
  set_id: string | null;
  paused_ms: number | null;
  next_ms: number | null;
  claimed_ms: number | null;
  last_ms: number | null;
  enqueued_ms: number | null;
  version: string | number;
  created_ms: number;
  updated_ms: number;
};

const ref = (schema: string) => sql`${sql.identifier(schema)}.runtime_schedules`;

/** The columns a RuntimeScheduleRecord is read from, off alias `s`. */
const recordColumns = sql`s.key, s.kind, s.cron, s.interval_ms, s.timezone, s.payload, s.queue, s.job_options,
  ${epochMs(sql`s.start_at`)} as start_ms, ${epochMs(sql`s.end_at`)} as end_ms, s.missed, s.late_after_ms, s.set_id,
  ${epochMs(sql`s.paused_at`)} as paused_ms, ${epochMs(sql`s.next_run_at`)} as next_ms,
  ${epochMs(sql`s.claimed_until`)} as claimed_ms, ${epochMs(sql`s.last_occurrence`)} as last_ms,
  ${epochMs(sql`s.last_enqueued_at`)} as enqueued_ms, s.version,
  ${epochMs(sql`s.created_at`)} as created_ms, ${epochMs(sql`s.updated_at`)} as updated_ms`;

function toRecord(r: RecordRow): RuntimeScheduleRecord {
  return {
    key: r.key,
    kind: r.kind,
    cron: r.cron,
    intervalMs: r.interval_ms === null ? null : Number(r.interval_ms),
    timezone: r.timezone,
    payload: typeof r.payload === 'string' ? JSON.parse(r.payload) : r.payload,
    queue: r.queue,
    jobOptions: typeof r.job_options === 'string' ? JSON.parse(r.job_options) : r.job_options,
    startAt: toDate(r.start_ms),
    endAt: toDate(r.end_ms),
    missed: r.missed,
    lateAfterMs: r.late_after_ms,
    setId: r.set_id,
    pausedAt: toDate(r.paused_ms),
    nextRunAt: toDate(r.next_ms),
    claimedUntil: toDate(r.claimed_ms),
    lastOccurrence: toDate(r.last_ms),
    lastEnqueuedAt: toDate(r.enqueued_ms),
    version: Number(r.version),
    createdAt: toDate(r.created_ms) as Date,
    updatedAt: toDate(r.updated_ms) as Date,
  };
}

/** Rows of a statement run alone (an array) or in a neon-http batch (`{ rows }`). */
export function rowsOf<T>(raw: unknown): T[] {
  if (Array.isArray(raw)) return raw as T[];
  return ((raw as { rows?: T[] } | undefined)?.rows ?? []) as T[];
}

/**
 * The first occurrence of an interval schedule strictly after `now`: its anchor (start_at, or
 * when it was created) plus a whole number of intervals.
 */
function intervalNext(anchor: SQL, intervalMs: SQL, now: SQL): SQL {
  return sql`case when ${now} < ${anchor} then ${anchor}
    else ${anchor} + ((floor(extract(epoch from (${now} - ${anchor})) * 1000 / ${intervalMs})::bigint + 1)
      * ${intervalMs}) * interval '1 millisecond' end`;
}

/**
 * The next run of a definition (alias `i`) on the database's clock: an interval's from its anchor; a
 * cron's, the first of its candidates after now (or now when the caller's clock was far behind:
 * the tick then places it); null past end_at.
 */
function nextRunOf(anchor: SQL, now: SQL): SQL {
  const cronNext = sql`(select coalesce(min(x::timestamptz) filter (where x::timestamptz > ${now}), ${now})
    from jsonb_array_elements_text(i.candidates) x)`;
  return sql`(select case when n > i.end_at then null else n end from (select case when i.interval_ms is not null
    then ${intervalNext(anchor, sql`i.interval_ms`, now)} else ${cronNext} end as n) x)`;
}

export type ScheduleWriteMode = 'create' | 'update' | 'upsert';
export type ScheduleWriteRow = {
  key: string;
  outcome: 'created' | 'updated' | 'unchanged' | 'deleted';
  next_ms: number | null;
};

/**
 * Writes run-time schedules (RuntimeScheduleWrite), ONE statement for any number of them:
 * - `create`: inserts the new keys; a key that exists is left alone (absent from the result);
 * - `update`: rewrites existing keys whose definition differs (a missing key is absent);
 * - `upsert`: both; an unchanged definition writes nothing (no new row version, no version bump).
 * With `set` (applySchedules), the set's keys the input no longer lists are deleted in the same
 * statement. A changed timing (pattern, zone, start, end) recomputes next_run_at on the
 * database's clock (still null while paused); every change bumps `version` and drops a tick's
 * claim, so an edit made while a tick holds the row wins over that tick.
 */
export function writeRuntimeSchedulesStatement(
  schema: string,
  rows: readonly RuntimeScheduleInput[],
  options: { mode: ScheduleWriteMode; set?: string; now?: Date },
): SQL {
  const table = ref(schema);
  const now = sql`(select now from clock)`;
  const input = sql`clock as (select ${nowExpr(options.now)} as now),
    i as (
      -- ::text first: a client that types parameters from the statement would send it JSON-encoded again.
      select * from jsonb_to_recordset(${JSON.stringify(rows)}::text::jsonb) as r(key text, kind text, cron text,
        interval_ms bigint, timezone text, payload_json text, queue text, job_options jsonb, start_at timestamptz,
        end_at timestamptz, missed text, late_after_ms int, set_id text, candidates jsonb)
    )`;
  const definition = (a: string) =>
    sql.raw(
      `(${a}.kind, ${a}.cron, ${a}.interval_ms, ${a}.timezone, ${a}.payload, ${a}.queue, ${a}.job_options, ${a}.start_at, ${a}.end_at, ${a}.missed, ${a}.late_after_ms, ${a}.set_id)`,
    );
  const timing = (a: string) => sql.raw(`(${a}.cron, ${a}.interval_ms, ${a}.timezone, ${a}.start_at, ${a}.end_at)`);
  const inputDefinition = sql.raw(
    '(i.kind, i.cron, i.interval_ms, i.timezone, i.payload_json::jsonb, i.queue, i.job_options, i.start_at, i.end_at, i.missed, i.late_after_ms, i.set_id)',
  );
  const inputTiming = sql.raw('(i.cron, i.interval_ms, i.timezone, i.start_at, i.end_at)');
  // The interval's anchor: its start, or when the schedule was first created.
  const changedNext = sql`case when s.paused_at is not null then null
    when ${timing('s')} is distinct from ${inputTiming} then ${nextRunOf(sql`coalesce(i.start_at, s.created_at)`, now)}
    else s.next_run_at end`;
  const changed = sql`${definition('s')} is distinct from ${inputDefinition}`;
  const inserted = sql`insert into ${table} as s (key, kind, cron, interval_ms, timezone, payload, queue, job_options,
      start_at, end_at, missed, late_after_ms, set_id, next_run_at, version, created_at, updated_at)
    select i.key, i.kind, i.cron, i.interval_ms, i.timezone, i.payload_json::jsonb, i.queue, i.job_options,
      i.start_at, i.end_at, i.missed, i.late_after_ms, i.set_id, ${nextRunOf(sql`coalesce(i.start_at, ${now})`, now)},
      1, ${now}, ${now}
    from i`;
  const updateSet = sql`kind = i.kind, cron = i.cron, interval_ms = i.interval_ms, timezone = i.timezone,
      payload = i.payload_json::jsonb, queue = i.queue, job_options = i.job_options, start_at = i.start_at,
      end_at = i.end_at, missed = i.missed, late_after_ms = i.late_after_ms, set_id = i.set_id,
      next_run_at = ${changedNext}, claimed_until = null, version = s.version + 1, updated_at = ${now}`;
  let written: SQL;
  if (options.mode === 'create') {
    written = sql`${inserted} on conflict (key) do nothing
      returning s.key, 'created'::text as outcome, ${epochMs(sql`s.next_run_at`)} as next_ms`;
  } else if (options.mode === 'update') {
    written = sql`update ${table} s set ${updateSet} from i where s.key = i.key and ${changed}
      returning s.key, 'updated'::text as outcome, ${epochMs(sql`s.next_run_at`)} as next_ms`;
  } else {
    // excluded's row stands for i in the conflict branch: the input is joined back by key.
    written = sql`${inserted} on conflict (key) do update set ${sql.raw(
      `kind = excluded.kind, cron = excluded.cron, interval_ms = excluded.interval_ms, timezone = excluded.timezone,
      payload = excluded.payload, queue = excluded.queue, job_options = excluded.job_options, start_at = excluded.start_at,
      end_at = excluded.end_at, missed = excluded.missed, late_after_ms = excluded.late_after_ms, set_id = excluded.set_id,
      claimed_until = null, version = s.version + 1,`,
    )}
      next_run_at = case when s.paused_at is not null then null
        when ${timing('s')} is distinct from ${timing('excluded')}
          then (select ${nextRunOf(sql`coalesce(i.start_at, s.created_at)`, now)} from i where i.key = excluded.key)
        else s.next_run_at end,
      updated_at = excluded.updated_at
      where ${definition('s')} is distinct from ${definition('excluded')}
      returning s.key, case when s.version = 1 then 'created' else 'updated' end as outcome,
        ${epochMs(sql`s.next_run_at`)} as next_ms`;
  }
  const deleted = options.set
    ? sql`, deleted as (
        delete from ${table} s where s.set_id = ${options.set} and not exists (select 1 from i where i.key = s.key)
        returning s.key
      )`
    : sql``;
  return sql`with ${input}, written as (${written})${deleted}
    select key, outcome, next_ms from written
    ${options.set ? sql`union all select key, 'deleted', null from deleted` : sql``}
    ${
      options.mode === 'update'
        ? sql`union all select i.key, 'unchanged', null from i join ${table} s on s.key = i.key
          where not exists (select 1 from written w where w.key = i.key)`
        : sql``
    }`;
}

/** Pauses (next_run_at null: the tick never reads it) or resumes schedules (RuntimeSchedulePause). */
export function pauseRuntimeSchedulesStatement(
  schema: string,
  keys: readonly string[],
  paused: boolean,
  now?: Date,
): SQL {
  const table = ref(schema);
  const at = sql`(select now from clock)`;
  // A resumed schedule is due now: the next tick places it on its next occurrence (occurrences
  // while it was paused are not made up), which croner computes in JavaScript.
  const set = paused
    ? sql`paused_at = ${at}, next_run_at = null`
    : sql`paused_at = null, next_run_at = case when s.end_at < ${at} then null else greatest(${at}, s.start_at) end`;
  return sql`with clock as (select ${nowExpr(now)} as now)
    update ${table} s set ${set}, claimed_until = null, version = s.version + 1, updated_at = ${at}
    where s.key = any(${sql.param(keys)}::text[]) and s.paused_at is ${paused ? sql`null` : sql`not null`}
    returning s.key`;
}

/** Deletes schedules (RuntimeScheduleDelete); a tick holding one writes nothing for it. */
export function deleteRuntimeSchedulesStatement(schema: string, keys: readonly string[]): SQL {
  return sql`delete from ${ref(schema)} s where s.key = any(${sql.param(keys)}::text[]) returning s.key`;
}

/** Schedules by key, or a page of them by key order (RuntimeScheduleList). */
export async function listRuntimeScheduleRecords(
  db: Executor,
  schema: string,
  request: { keys?: readonly string[]; prefix?: string; after?: string; limit: number },
): Promise<RuntimeScheduleRecord[]> {
  const where: SQL[] = [sql`true`];
  if (request.keys) where.push(sql`s.key = any(${sql.param(request.keys)}::text[])`);
  if (request.prefix) where.push(sql`starts_with(s.key, ${request.prefix})`);
  if (request.after) where.push(sql`s.key > ${request.after}`);
  const rows = await queryRows<RecordRow>(
    db,
    sql`select ${recordColumns} from ${ref(schema)} s where ${sql.join(where, sql` and `)}
      order by s.key limit ${request.limit}`,
    schema,
  );
  return rows.map(toRecord);
}

/** The selection for get/list, as a statement (a neon-http batch reads it with readRuntimeScheduleRecords). */
export function getRuntimeSchedulesStatement(schema: string, keys: readonly string[]): SQL {
  return sql`select ${recordColumns} from ${ref(schema)} s where s.key = any(${sql.param(keys)}::text[]) order by s.key`;
}

export function readRuntimeScheduleRecords(raw: unknown): RuntimeScheduleRecord[] {
  return rowsOf<RecordRow>(raw).map(toRecord);
}

/**
 * Claims up to `limit` due schedules (RuntimeScheduleClaim): the oldest next_run_at ≤ now, read
 * through the partial index on next_run_at, `FOR UPDATE SKIP LOCKED` so that concurrent ticks take
 * different rows without waiting, then a short lease (`claimed_until`) so that the next statement
 * of another tick passes over them too (there is no transaction to hold the row lock). A tick that
 * dies leaves its rows to the next tick once the lease ends. Returns them with the clock it used,
 * and, after a full claim, whether more are due.
 */
export async function claimDueRuntimeSchedules(
  db: Executor,
  schema: string,
  request: { limit: number; leaseMs: number; now?: Date },
): Promise<{ now: Date; rows: RuntimeScheduleRecord[]; more: boolean }> {
  const table = ref(schema);
  const rows = await queryRows<RecordRow & { now_ms: number; more: boolean }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
      -- One row more than it takes: whether another round is due, read by the same index scan.
      due as (
        select s.key, s.next_run_at from ${table} s
        where s.next_run_at <= (select now from clock)
          and (s.claimed_until is null or s.claimed_until <= (select now from clock))
        order by s.next_run_at
        limit ${request.limit + 1}
        for update skip locked
      ),
      taken as (select key from due order by next_run_at limit ${request.limit}),
      claimed as (
        update ${table} s set claimed_until = (select now from clock) + ${request.leaseMs} * interval '1 millisecond'
        from taken where s.key = taken.key
        returning s.*
      )
      select ${recordColumns}, ${epochMs(sql`(select now from clock)`)} as now_ms,
        (select count(*) from due) > ${request.limit} as more
      from claimed s`,
    schema,
  );
  const now = rows[0]?.now_ms;
  return {
    now: now === undefined ? (request.now ?? new Date()) : new Date(Number(now)),
    rows: rows.map(toRecord),
    more: rows[0]?.more === true,
  };
}

/** What a tick decided for one claimed schedule. */
export interface RuntimeScheduleMove {
  key: string;
  /** The version and next_run_at it claimed: the compare-and-set. */
  version: number;
  expectedNext: Date;
  /** Its next run after this tick (null: past its end, or no further occurrence). */
  next: Date | null;
  /** The newest occurrence handled by this tick (enqueued or dropped as missed), if any. */
  last: Date | null;
  enqueued: boolean;
}

/**
 * Moves the claimed schedules on and enqueues their occurrences' jobs in ONE statement
 * (RuntimeScheduleFire): a compare-and-set per schedule on the version and next_run_at it
 * claimed, and the insert of only the jobs of the schedules it moved. An edit, pause or delete
 * since the claim changed the version (or removed the row): that schedule's jobs are not written.
 * A schedule another tick moved first (a lease that ran out) has a new next_run_at: the same.
 * `rows` carry dedupe keys `<key>@<occurrence>`; `scheduleOf(ord)` is the row's schedule key.
 */
export async function fireRuntimeSchedules(
  db: Executor,
  schema: string,
  request: { moves: readonly RuntimeScheduleMove[]; rows: readonly JobInsertRow[]; scheduleOf: readonly string[] },
): Promise<{ moved: Set<string>; ids: (string | null)[] }> {
  const table = ref(schema);
  const moves = JSON.stringify(
    request.moves.map((m) => ({
      key: m.key,
      version: m.version,
      expected: m.expectedNext.toISOString(),
      next: m.next?.toISOString() ?? null,
      last: m.last?.toISOString() ?? null,
      enqueued: m.enqueued,
    })),
  );
  const moved = sql`moves as (
      select * from jsonb_to_recordset(${moves}::text::jsonb)
        as m(key text, version bigint, expected timestamptz, next timestamptz, last timestamptz, enqueued boolean)
    ),
    owners as (
      select * from jsonb_to_recordset(${JSON.stringify(request.scheduleOf.map((key, ord) => ({ ord, key })))}::text::jsonb)
        as o(ord int, key text)
    ),
    moved as (
      update ${table} s set next_run_at = m.next, last_occurrence = coalesce(m.last, s.last_occurrence),
        last_enqueued_at = case when m.enqueued then clock_timestamp() else s.last_enqueued_at end,
        claimed_until = null
      from moves m
      -- JavaScript reads times in milliseconds: compare in milliseconds.
      where s.key = m.key and s.version = m.version and date_trunc('milliseconds', s.next_run_at) = m.expected
      returning s.key
    )`;
  if (request.rows.length === 0) {
    const rows = await queryRows<{ key: string }>(db, sql`with ${moved} select key from moved`, schema);
    return { moved: new Set(rows.map((r) => r.key)), ids: [] };
  }
  // One row per job written, only for the schedules it moved (a schedule that moved with no job
  // to write is not reported: nothing of it needs reporting).
  const outcomes = readInsertOutcomes(
    await queryRows<InsertRow>(
      db,
      insertJobsStatement(schema, request.rows, {
        ctes: moved,
        // One hashed set of the moved schedules' rows, not a scan of them per row.
        condition: sql`r.ord in (select o.ord from owners o join moved mv on mv.key = o.key)`,
      }),
      schema,
    ),
  );
  const ids: (string | null)[] = new Array(request.rows.length).fill(null);
  const fired = new Set<string>();
  for (const o of outcomes) {
    ids[o.ord] = o.id;
    fired.add(request.scheduleOf[o.ord] as string);
  }
  return { moved: fired, ids };
}
