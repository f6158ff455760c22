import { type SQL, sql } from 'drizzle-orm';
import type { BreakerMove, BreakerState, Outcome } from '../../base/outcomes.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, toDate } from './common.js';

/**
 * Destination health: a breaker and a Retry-After deferral per destination, in the table
 * `destinations` (migration 0014). The state machine itself lives in two functions of that
 * migration: record_destination_outcomes (every settle that carries attempts against destinations)
 * and claim_probes (the half-open probe, in the limited claim).
 */
export interface DestinationHealth {
  name: string;
  state: BreakerState;
  /** Failures and attempts over the rolling window (the previous window weighted by its overlap). */
  failures: number;
  calls: number;
  /** When it opened; null when closed. */
  openedAt: Date | null;
  /** open: when the next probe may go; null otherwise. */
  nextProbeAt: Date | null;
  /** half_open: the probe job and when its turn runs out. */
  probeJobId: string | null;
  probeUntil: Date | null;
  /** A Retry-After deferral of the whole destination, while it lasts. */
  deferredUntil: Date | null;
  /** How many times in a row it opened (each cool-down twice the last). */
  trips: number;
  changedAt: Date;
  changedBy: string | null;
}

export type { BreakerMove, BreakerState };

export const destinationsRef = (schema: string) => sql`${sql.identifier(schema)}.destinations`;

/**
 * A CTE `destination_moves` (destination, from_state, to_state, open_until, failures, calls) that
 * records `outcomes` through record_destination_outcomes, on the statement's clock (a `clock` CTE).
 */
export function recordDestinationsCte(schema: string, outcomes: readonly Outcome[]): SQL {
  const withDestination = outcomes.flatMap((o) => (o.destination ? [{ id: o.id, d: o.destination }] : []));
  const col = <T>(f: (o: (typeof withDestination)[number]) => T) => sql.param(withDestination.map(f));
  return sql`destination_moves as (
      select * from ${sql.identifier(schema)}.record_destination_outcomes(
        ${col((o) => o.d.name)}::text[], ${col((o) => o.id)}::bigint[], ${col((o) => o.d.failed)}::boolean[],
        ${col((o) => o.d.deferMs)}::bigint[], ${col((o) => o.d.breaker.failures)}::int[],
        ${col((o) => o.d.breaker.failureRate)}::real[], ${col((o) => o.d.breaker.windowMs)}::int[],
        ${col((o) => o.d.breaker.coolDownMs)}::int[], ${col((o) => o.d.breaker.maxCoolDownMs)}::int[],
        (select now from clock))
    )`;
}

/** Whether any of `outcomes` concerns a destination (then the settle records them). */
export const hasDestinations = (outcomes: readonly Outcome[]) => outcomes.some((o) => o.destination !== undefined);

/** The rows of `destination_moves` as one JSON array (or null). */
export const movesJson = () =>
  sql`(select json_agg(json_build_array(m.destination, m.from_state, m.to_state, ${epochMs(sql`m.open_until`)},
      m.failures, m.calls)) from destination_moves m)`;

type MoveTuple = [string, BreakerState, BreakerState, number | null, number, number];

export function toMoves(json: MoveTuple[] | null | undefined): BreakerMove[] {
  return (json ?? []).map(([destination, from, to, openUntil, failures, calls]) => ({
    destination,
    from,
    to,
    openUntil: toDate(openUntil),
    failures,
    calls,
  }));
}

/**
 * The claim's view of the destinations, as a FROM clause for the columns `x.blocked` (open and
 * cooling down, probe in flight, deferred) and `x.probing` (waiting for a probe), each text[]. Read through
 * held_destinations(), which has a snapshot of its own: `gate` (the statement's settle_done) makes
 * it read after the settle, so breakers that settle opened hold in the same statement's claim.
 */
export function heldDestinationsFrom(schema: string, now: SQL, gate: SQL): SQL {
  return sql`${sql.identifier(schema)}.held_destinations(${now}) x where ${gate}`;
}

/**
 * Whether a claim must leave some destination out, read after its settle (see
 * heldDestinationColumns): for statements whose settle carries attempts against destinations.
 */
export function destinationsNeedLimitedClaimAfter(schema: string, now: SQL, gate: SQL): SQL {
  return sql`exists (select 1 from ${sql.identifier(schema)}.held_destinations(${now}) x
      where ${gate} and (cardinality(x.blocked) > 0 or cardinality(x.probing) > 0))`;
}

/**
 * CTE `probe_won`: claim_probes over the picks the claim chose (`within`: the turn is asked for only
 * by a job the claim will take, so `within` must hold every condition of the update — a claim that
 * defers to a richer shape finds it empty). The claim then takes every chosen row but a pick that
 * did not win.
 */
export function claimProbeCtes(schema: string, request: { leaseOf: (kind: SQL) => SQL; now: SQL }): SQL {
  const chosenPicks = sql`from probe_pick p where p.id in (select id from within)`;
  return sql`probe_won as (
      select * from ${sql.identifier(schema)}.claim_probes(
        (select coalesce(array_agg(p.dest), '{}') ${chosenPicks}),
        (select coalesce(array_agg(p.id), '{}') ${chosenPicks}),
        (select coalesce(array_agg(${request.leaseOf(sql`p.kind`)}), '{}') ${chosenPicks}),
        ${request.now})
    )`;
}

type HealthRow = {
  name: string;
  state: BreakerState;
  failures: number;
  calls: number;
  opened_at_ms: number | null;
  open_until_ms: number | null;
  probe_job: string | null;
  probe_until_ms: number | null;
  deferred_until_ms: number | null;
  trips: number;
  changed_at_ms: number;
  changed_by: string | null;
};

/** Every destination skiplock remembers, with its breaker (BreakerList); `name` narrows to one. */
export async function listDestinations(
  db: Executor,
  schema: string,
  request: { name?: string; now?: Date } = {},
): Promise<DestinationHealth[]> {
  const now = nowExpr(request.now);
  const only = request.name === undefined ? sql`` : sql`where d.name = ${request.name}`;
  // The same weighting as record_destination_outcomes: the previous window counts for the part of
  // it the rolling window still covers.
  const rows = await queryRows<HealthRow>(
    db,
    sql`select d.name, d.state,
        round(coalesce(d.prev_failures * (1 - w.frac) + d.window_failures, 0))::int as failures,
        round(coalesce(d.prev_calls * (1 - w.frac) + d.window_calls, 0))::int as calls,
        ${epochMs(sql`d.opened_at`)} as opened_at_ms, ${epochMs(sql`d.open_until`)} as open_until_ms,
        d.probe_job::text as probe_job, ${epochMs(sql`d.probe_until`)} as probe_until_ms,
        ${epochMs(sql`case when d.deferred_until > ${now} then d.deferred_until end`)} as deferred_until_ms,
        d.trips, ${epochMs(sql`d.changed_at`)} as changed_at_ms, d.changed_by
      from ${destinationsRef(schema)} d
      cross join lateral (select case
          when d.window_start is null or ${now} >= d.window_start + 2 * d.window_ms * interval '1 millisecond' then null
          else greatest(0, least(1, extract(epoch from ${now} - d.window_start) * 1000 / d.window_ms)) end as frac) w
      ${only}
      order by d.state = 'closed', d.name`,
    schema,
  );
  return rows.map((r) => ({
    name: r.name,
    state: r.state,
    failures: r.failures,
    calls: r.calls,
    openedAt: toDate(r.opened_at_ms),
    nextProbeAt: r.state === 'open' ? toDate(r.open_until_ms) : null,
    probeJobId: r.probe_job,
    probeUntil: toDate(r.probe_until_ms),
    deferredUntil: toDate(r.deferred_until_ms),
    trips: r.trips,
    changedAt: toDate(r.changed_at_ms) as Date,
    changedBy: r.changed_by,
  }));
}

/**
 * Closes a destination's breaker and ends its deferral (BreakerReset): its jobs are claimable at
 * once, its window starts empty. Returns the state it was in, or null when skiplock has no record
 * of the destination.
 */
export async function resetDestination(
  db: Executor,
  schema: string,
  request: { name: string; by: string; now?: Date },
): Promise<BreakerState | null> {
  const now = nowExpr(request.now);
  const rows = await queryRows<{ previous: BreakerState }>(
    db,
    sql`update ${destinationsRef(schema)} d set state = 'closed', trips = 0, opened_at = null, open_until = null,
        probe_job = null, probe_until = null, deferred_until = null, window_start = null, window_calls = 0,
        window_failures = 0, prev_calls = 0, prev_failures = 0, changed_at = ${now}, changed_by = ${request.by},
        updated_at = ${now}
      from (select name, state from ${destinationsRef(schema)} where name = ${request.name} for update) old
      where d.name = old.name
      returning old.state as previous`,
    schema,
  );
  return rows[0]?.previous ?? null;
}
