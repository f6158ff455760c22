import { type Placeholder, type SQL, sql } from 'drizzle-orm';
import type { Completion, Outcome, SettledJob, SettleReport } from '../../base/outcomes.js';
import { queryHotRows, queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { cachedSettleStatement } from './claim-cache.js';
import { appendCapped, epochMs, jobsRef, nowExpr } from './common.js';
import { destinationsRef, hasDestinations, movesJson, recordDestinationsCte, toMoves } from './destinations.js';
import { releaseAfterCtes } from './ordering.js';
import { type SettleParams, settleParams } from './settle-params.js';

export type { SettleParams } from './settle-params.js';

/**
 * Writes the outcomes of a whole batch in ONE statement (JobSetStateIfRunningMany).
 * Every row is fenced: it changes only while the job is still running under the same
 * lease token. A holder whose lease expired and was re-claimed gets nothing back for
 * that job — it lost the lease, and the new holder's state stands.
 * A retry of a job that has used all its attempts goes to the DLQ as `max_attempts`.
 */
export async function settleJobs(
  db: Executor,
  schema: string,
  outcomes: readonly Outcome[],
  now?: Date,
  completion: Completion = 'keep',
): Promise<SettledJob[]> {
  if (outcomes.length === 0) return [];
  // settle_done runs the destinations' record too (a CTE no one reads is never run).
  const rows = await queryRows<SettledRow>(
    db,
    sql`with clock as (select ${nowExpr(now)} as now), ${settleCtes(schema, outcomes, completion)}
    select id::text as id, state, dead_reason, ${epochMs(sql`run_at`)} as run_at_ms from settled
    where (select n from settle_done) >= 0`,
    schema,
  );
  return rows.map(toSettledJob);
}

export type SettledRow = {
  id: string;
  state: SettledJob['state'];
  dead_reason: string | null;
  run_at_ms: number;
  parent?: boolean;
};

export function toSettledJob(r: SettledRow): SettledJob {
  return {
    id: r.id,
    state: r.state,
    deadReason: r.dead_reason,
    runAt: new Date(r.run_at_ms),
    ...(r.parent ? { hasDependents: true as const } : {}),
  };
}

/** Writes a batch of outcomes (as settleJobs) and reports only the exceptions. */
export async function settleOutcomes(
  db: Executor,
  schema: string,
  outcomes: readonly Outcome[],
  now?: Date,
  completion: Completion = 'keep',
): Promise<SettleReport> {
  const report: SettleReport = { lost: new Set(), changed: new Map() };
  if (outcomes.length === 0) return report;
  const destined = hasDestinations(outcomes);
  const [row] = await queryHotRows<{ report: SettleReportTuple[] | null; moves: Parameters<typeof toMoves>[0] }>(
    db,
    cachedSettleStatement(schema, outcomes, now, completion, settleStatement) ??
      settleStatement(schema, outcomes, now, completion),
    schema,
    { cheap: true }, // its rows are found by id
  );
  addReportTuples(report, row?.report);
  if (destined) report.moves = toMoves(row?.moves);
  return report;
}

/**
 * settleOutcomes's statement. One row: the report as JSON tuples, and the breakers the outcomes
 * moved (settle_done runs every write, the destinations' record included). `params`: placeholders
 * for the settle's parameters (claim-cache.ts renders it so; exported for its test).
 */
export function settleStatement(
  schema: string,
  outcomes: readonly Outcome[],
  now: Date | Placeholder | undefined,
  completion: Completion,
  params?: SettleParams,
): SQL {
  return sql`with clock as (select ${nowExpr(now)} as now), ${settleCtes(schema, outcomes, completion, params)}
    select ${settleReportJson()} as report,
      ${hasDestinations(outcomes) ? movesJson() : sql`null::json`} as moves, (select n from settle_done) as n`;
}

export type SettleReportRow = {
  row_kind: 'settled' | 'lost' | string;
  id: string;
  state: SettledJob['state'] | null;
  dead_reason: string | null;
  run_at_ms: number | null;
};

/** A report row as the statements send it: one JSON array per row (one JSON.parse for them all). */
export type SettleReportTuple = [
  rowKind: SettleReportRow['row_kind'],
  id: string,
  state: SettleReportRow['state'],
  deadReason: string | null,
  runAtMs: number | null,
  parent: boolean | null,
];

export function addReportTuples(report: SettleReport, tuples: readonly SettleReportTuple[] | null | undefined): void {
  for (const [row_kind, id, state, dead_reason, run_at_ms, parent] of tuples ?? []) {
    if (row_kind === 'lost') report.lost.add(id);
    else report.changed.set(id, toSettledJob({ id, state, dead_reason, run_at_ms, parent } as SettledRow));
  }
}

/** The report rows of settleCtes as one JSON array of SettleReportTuple (null when there are none). */
export function settleReportJson(): SQL {
  return sql`(select json_agg(json_build_array(s.row_kind, s.id, s.state, s.dead_reason, s.run_at_ms, s.parent))
    from (${settleReportRows()}) s)`;
}

/**
 * The CTEs `settle_input` (id and lease token of each outcome), `settled` (the fenced writes,
 * RETURNING id, state, dead_reason, run_at, and `parent`: whether jobs wait for it) and `settle_done` (reading it runs every write),
 * for use after a `clock` CTE; claimJobs runs them in the same statement as the next claim.
 */
export function settleCtes(
  schema: string,
  outcomes: readonly Outcome[],
  completion: Completion = 'keep',
  params: SettleParams = settleParams(outcomes),
): SQL {
  const release = releaseNextCtes(schema, outcomes);
  const input = sql`settle_input as (${settleInput(params)})`;
  // What the attempts did to their destinations: written in the settle's part of the statement,
  // before the claim locks anything (settle_done gates the claim), so the destinations' row locks
  // come first in every statement, in name order (record_destination_outcomes).
  const destined = hasDestinations(outcomes);
  const record = destined ? sql`${recordDestinationsCte(schema, outcomes)}, ` : sql``;
  const recorded = destined ? sql` + (select count(*) from destination_moves)` : sql``;
  if (completion === 'keep') {
    return sql`${input}, settled as (${settleUpdate(schema, outcomes, params)}), ${record}
      settle_done as (select (select count(*) from settled)${recorded} as n)${release}`;
  }
  // 'delete': completed rows go, except those holding a dedupe window (their row is the window) and
  // those with dependents (their children read their results). `kept` writes every completion the
  // delete did not take: a child's enqueue that held the row locked may have added dependents to it
  // after this statement's snapshot (the delete re-checks that row and leaves it).
  // What remains of them is a count per minute, queue and kind, for the stats.
  const completions = outcomes.filter((o) => o.outcome === 'completed');
  const others = outcomes.filter((o) => o.outcome !== 'completed');
  const onlyCompletions = others.length === 0 ? sql`` : sql`and r.id = any(${idList(completions.map((o) => o.id))})`;
  const parts = [
    input,
    sql`deleted as (
      delete from ${jobsRef(schema)} j using settle_input r
      where j.id = r.id and ${byIds()} and j.lease_token = r.token and ${heldById()} and j.dedupe_mode is distinct from 'window'
        and j.dependents is null ${onlyCompletions}
      returning j.id, j.queue, j.kind)`,
    // A plain insert, never an upsert: writers share no row, so they never wait on each other.
    sql`counted as (
      insert into ${sql.identifier(schema)}.completed_counts (minute, queue, kind, completed)
      select date_trunc('minute', (select now from clock)), d.queue, d.kind, count(*)
      from deleted d group by d.queue, d.kind
      returning 1)`,
    // Only the completions the delete left are looked up: by all of settle_input, the update probed
    // the primary key for each of the batch's rows the delete had just removed (45 % of the settle).
    sql`kept as (${settleUpdate(schema, completions, params, sql`select r.id from settle_input r where r.id not in (select id from deleted) ${onlyCompletions}`)})`,
  ];
  if (others.length > 0) parts.push(sql`others as (${settleUpdate(schema, others, params)})`);
  parts.push(sql`settled as (
    select d.id, 'completed'::text as state, null::text as dead_reason, null::timestamptz as run_at, false as parent
    from deleted d
    union all select * from kept ${others.length > 0 ? sql`union all select * from others` : sql``})`);
  if (destined) parts.push(recordDestinationsCte(schema, outcomes));
  parts.push(
    sql`settle_done as (select (select count(*) from settled) + (select count(*) from counted)${recorded} as n)`,
  );
  return sql`${sql.join(parts, sql`, `)}${release}`;
}

/** The release of the next jobs of the keys whose jobs this settle ended; nothing without keys. */
function releaseNextCtes(schema: string, outcomes: readonly Outcome[]): SQL {
  const keys = new Set<string>();
  for (const o of outcomes) if (o.orderingKey) keys.add(o.orderingKey);
  if (keys.size === 0) return sql``;
  return sql`, ${releaseAfterCtes(schema, sql`select id, state from settled`, [...keys])}`;
}

/**
 * The report rows for settleCtes: one per job that did not complete (state, dead reason, next
 * run) and one per outcome whose lease was lost. A batch of completions usually returns none.
 */
function settleReportRows(): SQL {
  return sql`select 'settled' as row_kind, s.id::text as id, s.state, s.dead_reason,
        ${epochMs(sql`s.run_at`)} as run_at_ms, s.parent
      from settled s where s.state <> 'completed'
      union all
      select 'lost', i.id::text, null, null, null::float8, null
      from settle_input i where i.id not in (select id from settled)`;
}

/**
 * Each outcome's id and lease token. A lease token is issued per claim, so a batch carries a
 * handful of distinct tokens: they are sent once, and each id refers to its token by position.
 */
function settleInput(params: SettleParams): SQL {
  return sql`select r.id, (${sql.param(params.tokens)}::uuid[])[r.t] as token
    from unnest(string_to_array(${params.ids}, ',')::bigint[], string_to_array(${params.tokenAt}, ',')::int[]) as r(id, t)`;
}

/**
 * A bigint[] sent as one comma-separated string, not an array parameter: the driver would quote
 * and escape each of the hundreds of elements (a visible share of Node's time per batch).
 */
function idList(ids: readonly string[]): SQL {
  return sql`string_to_array(${ids.join(',')}, ',')::bigint[]`;
}

/**
 * "Still running" for a batch found by id. Written so that it cannot match the partial index
 * on running rows: with that index in reach, the planner (whose statistics rarely see many
 * running rows) hashed every running job to find the batch's 500 — 25 ms per statement with
 * 16 invocations holding 8,000 leases. By id, each row costs one primary-key probe.
 */
const heldById = (): SQL => sql`(case when j.state = 'running' then true end)`;

/**
 * The fenced UPDATE … RETURNING id, state, dead_reason, run_at behind settleJobs, reading the
 * `settle_input` CTE. A batch of completions alone — the common case — takes a lean path.
 * `among` selects the ids to look up (delete mode: the completions the delete left).
 */
function settleUpdate(
  schema: string,
  outcomes: readonly Outcome[],
  params: SettleParams,
  among: SQL = sql`select id from settle_input`,
): SQL {
  const jobs = jobsRef(schema);
  const now = sql`(select now from clock)`;
  if (outcomes.every((o) => o.outcome === 'completed')) {
    // Results ride as one JSON array (SettleParams.results).
    const withResults = outcomes.some((o) => o.outcome === 'completed' && o.result !== undefined);
    const resultsFrom = withResults
      ? sql` left join jsonb_to_recordset(${params.results}::jsonb)
            as x(id bigint, result jsonb) on x.id = r.id`
      : sql``;
    return sql`update ${jobs} j set
        lease_token = r.token,
        state = 'completed',
        finished_at = ${now},
        lease_expires_at = null,
        ${withResults ? sql`result = x.result,` : sql``}
        updated_at = ${now}
      from settle_input r${resultsFrom}
      where j.id = r.id and ${byIds(among)} and j.lease_token = r.token and ${heldById()}
      returning j.id, j.state, j.dead_reason, j.run_at, j.dependents is not null as parent`;
  }
  const input = outcomes.map((o) => {
    const row = JSON.stringify({
      id: o.id,
      token: o.leaseToken,
      outcome: o.outcome,
      delay_ms: o.outcome === 'retry' ? Math.max(0, Math.round(o.delayMs)) : null,
      after_lease: o.outcome === 'retry' && o.afterLease === true,
      reason: o.outcome === 'dead' ? o.reason : null,
      error: 'error' in o && o.error ? o.error : null,
    });
    return o.outcome === 'completed' && o.result !== undefined ? `${row.slice(0, -1)},"result":${o.result}}` : row;
  });
  const exhausted = sql`(r.outcome = 'retry' and j.attempt >= j.max_attempts)`;
  const newState = sql`(case
    when r.outcome = 'completed' then 'completed'
    when r.outcome = 'cancelled' then 'cancelled'
    when r.outcome = 'retry' and not ${exhausted} then 'queued'
    else 'dead'
  end)`;
  // lease_token: equal to the current token by the WHERE below. Written anyway so that an audit of
  // the row sees which token each write was made under (the chaos checker relies on it).
  return sql`update ${jobs} j set
      lease_token = r.token,
      state = ${newState},
      dead_reason = case
        when r.outcome = 'dead' then coalesce(r.reason, 'discarded')
        when ${exhausted} then 'max_attempts'
      end,
      run_at = case when ${newState} = 'queued'
        then greatest(${now} + r.delay_ms * interval '1 millisecond', case when r.after_lease then j.lease_expires_at end)
        else j.run_at end,
      finished_at = case when ${newState} = 'queued' then null else ${now} end,
      lease_expires_at = null,
      result = case when r.outcome = 'completed' then r.result else j.result end,
      last_error = coalesce(r.error, j.last_error),
      errors = case when r.error is null then j.errors else ${appendCapped(sql`j.errors`, sql`r.error`)} end,
      updated_at = ${now}
    from jsonb_to_recordset(${`[${input.join(',')}]`}::jsonb)
      as r(id bigint, token uuid, outcome text, delay_ms bigint, after_lease boolean, reason text, error jsonb,
        result jsonb)
    where j.id = r.id and ${byIds(among)} and j.lease_token = r.token and ${heldById()}
    returning j.id, j.state, j.dead_reason, j.run_at, j.dependents is not null as parent`;
}

/**
 * The settled rows found by primary key: joined to settle_input alone, the planner hashed the whole
 * jobs table to find the batch (a sequential scan per settle, 3.2 of 8.9 ms on 20,000 rows).
 */
const byIds = (among: SQL = sql`select id from settle_input`): SQL => sql`j.id = any(array(${among}))`;

/** What giving back a job that never started writes: queued again at once, its claim's attempt taken back. */
const givenBack = (now?: Date): SQL =>
  sql`state = 'queued', attempt = j.attempt - 1, lease_expires_at = null,
    started_at = case when j.attempt - 1 = 0 then null else j.started_at end, updated_at = ${nowExpr(now)}`;

/**
 * Gives back claimed jobs that never started (JobReleaseMany): queued again, immediately
 * claimable, and the attempt the claim counted is taken back. Fenced like settleJobs.
 */
export async function releaseJobs(
  db: Executor,
  schema: string,
  jobs: readonly { id: string; leaseToken: string }[],
  now?: Date,
): Promise<string[]> {
  if (jobs.length === 0) return [];
  const rows = await queryRows<{ id: string }>(
    db,
    sql`update ${jobsRef(schema)} j set lease_token = r.token, ${givenBack(now)}
      from unnest(${sql.param(jobs.map((j) => j.id))}::bigint[], ${sql.param(jobs.map((j) => j.leaseToken))}::uuid[])
        as r(id, token)
      where j.id = r.id and j.id = any(${sql.param(jobs.map((j) => j.id))}::bigint[]) and j.lease_token = r.token
        and ${heldById()}
      returning j.id::text as id`,
    schema,
  );
  return rows.map((r) => r.id);
}

/** Pushes a held lease to at least `ms` from now (JobExtendLease). Null when the lease was lost. */
export async function extendLease(
  db: Executor,
  schema: string,
  job: { id: string; leaseToken: string },
  ms: number,
  now?: Date,
): Promise<Date | null> {
  // A breaker's half-open probe keeps its turn as long as its lease: else a second probe would go.
  const rows = await queryRows<{ lease_expires_at_ms: number }>(
    db,
    sql`with moved as (
        update ${jobsRef(schema)} j set
          lease_token = ${job.leaseToken},
          lease_expires_at = greatest(j.lease_expires_at, ${nowExpr(now)} + ${Math.max(0, Math.round(ms))} * interval '1 millisecond'),
          updated_at = ${nowExpr(now)}
        where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
        returning j.id, j.destination, j.lease_expires_at
      ),
      probe as (
        update ${destinationsRef(schema)} d set probe_until = greatest(d.probe_until, m.lease_expires_at)
        from moved m
        where m.destination is not null and d.name = m.destination and d.state = 'half_open' and d.probe_job = m.id
        returning 1
      )
      select ${epochMs(sql`m.lease_expires_at`)} as lease_expires_at_ms from moved m
      where (select count(*) from probe) >= 0`,
    schema,
  );
  const row = rows[0];
  return row ? new Date(row.lease_expires_at_ms) : null;
}

/**
 * Pushes the held leases of many jobs (a batch's) to at least `ms` from now, in one statement
 * (JobExtendLeaseMany): fenced per job like extendLease. Returns the ids whose lease was extended;
 * a job missing from them lost its lease.
 */
export async function extendLeases(
  db: Executor,
  schema: string,
  jobs: readonly { id: string; leaseToken: string }[],
  ms: number,
  now?: Date,
): Promise<string[]> {
  if (jobs.length === 0) return [];
  const ids = sql.param(jobs.map((j) => j.id));
  const rows = await queryRows<{ id: string }>(
    db,
    sql`with moved as (
        update ${jobsRef(schema)} j set
          lease_token = r.token,
          lease_expires_at = greatest(j.lease_expires_at, ${nowExpr(now)} + ${Math.max(0, Math.round(ms))} * interval '1 millisecond'),
          updated_at = ${nowExpr(now)}
        from unnest(${ids}::bigint[], ${sql.param(jobs.map((j) => j.leaseToken))}::uuid[]) as r(id, token)
        where j.id = r.id and j.id = any(${ids}::bigint[]) and j.lease_token = r.token and j.state = 'running'
        returning j.id, j.destination, j.lease_expires_at
      ),
      probe as (
        update ${destinationsRef(schema)} d set probe_until = greatest(d.probe_until, m.lease_expires_at)
        from moved m
        where m.destination is not null and d.name = m.destination and d.state = 'half_open' and d.probe_job = m.id
        returning 1
      )
      select m.id::text as id from moved m
      where (select count(*) from probe) >= 0`,
    schema,
  );
  return rows.map((r) => r.id);
}

/** Records a running job's progress (JobSetProgress). False when the lease was lost. */
export async function reportProgress(
  db: Executor,
  schema: string,
  job: { id: string; leaseToken: string },
  progress: unknown,
  now?: Date,
): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`update ${jobsRef(schema)} j set lease_token = ${job.leaseToken}, progress = ${JSON.stringify(progress ?? null)}::jsonb,
        updated_at = ${nowExpr(now)}
      where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
      returning j.id::text as id`,
    schema,
  );
  return rows.length === 1;
}

/**
 * Gives back every job one claim took (JobReleaseClaim), found by the claim's lease token: what a
 * worker sends when a claim's answer was lost (it may have committed, and the worker never learned
 * which jobs it took). Fenced like releaseJobs — the token, still running, still held by this
 * invocation — so it is safe to send whether the claim committed or not. Rare: it walks the running
 * rows (their partial index), not a batch's ids.
 */
export async function releaseClaim(
  db: Executor,
  schema: string,
  claim: { leaseToken: string; invocationId: string },
  now?: Date,
): Promise<string[]> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`update ${jobsRef(schema)} j set ${givenBack(now)}
      where j.state = 'running' and j.lease_token = ${claim.leaseToken}::uuid and j.locked_by = ${claim.invocationId}
      returning j.id::text as id`,
    schema,
  );
  return rows.map((r) => r.id);
}

/**
 * Of these outcomes, the ones a settle already wrote (JobSettledEarlierMany): the row carries the
 * outcome's lease token and is no longer running (a settle keeps the token it wrote under, and a
 * later claim would have replaced it). A worker asks after a settle whose answer was lost, when the
 * same outcomes sent again came back as lost: they were its own, not another holder's. Ids whose
 * row is gone come back with `gone` (delete mode removes a completed row).
 */
export async function findSettledEarlier(
  db: Executor,
  schema: string,
  outcomes: readonly { id: string; leaseToken: string }[],
): Promise<{ settled: SettledJob[]; gone: string[] }> {
  if (outcomes.length === 0) return { settled: [], gone: [] };
  const rows = await queryRows<SettledRow & { found: boolean }>(
    db,
    sql`select r.id::text as id, j.id is not null as found, j.state, j.dead_reason, ${epochMs(sql`j.run_at`)} as run_at_ms,
        coalesce(j.dependents is not null, false) as parent
      from unnest(${sql.param(outcomes.map((o) => o.id))}::bigint[], ${sql.param(outcomes.map((o) => o.leaseToken))}::uuid[])
        as r(id, token)
      left join ${jobsRef(schema)} j on j.id = r.id
      where j.id is null or (j.lease_token = r.token and j.state <> 'running')`,
    schema,
  );
  return {
    settled: rows.filter((r) => r.found).map(toSettledJob),
    gone: rows.filter((r) => !r.found).map((r) => r.id),
  };
}
