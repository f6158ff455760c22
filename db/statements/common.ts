import { type Placeholder, type SQL, sql } from 'drizzle-orm';

/** `"schema"."jobs"` for an already validated schema name. */
export function jobsRef(schema: string): SQL {
  return sql`${sql.identifier(schema)}.jobs`;
}

/**
 * `<alias>` is a running job — for a scan of all running rows of a queue or kind, which only
 * jobs_lease_idx serves: its predicate also requires lease_expires_at (set on every running row),
 * so that it never competes with the indexes of running keyed rows (see db/schema.ts).
 */
export function runningRow(alias: string): SQL {
  return sql.raw(`${alias}.state = 'running' and ${alias}.lease_expires_at is not null`);
}

/**
 * `<alias>` holds its ordering key: running, queued to run (ready or retrying), or dead and holding
 * the key — jobs_ordering_blockers_idx's predicate, spelled the same way so that a look-up by key
 * that says it can only use that index (a key's parked followers are not in it).
 */
export function holdsKey(alias: string): SQL {
  return sql.raw(
    `((${alias}.finished_at is null and ${alias}.run_at <> 'infinity') or (${alias}.dead_reason is not null and ${alias}.ordering_hold))`,
  );
}

/**
 * The statement's notion of "now": the database clock, read with clock_timestamp() so a
 * long caller transaction does not freeze it. Tests pass `now` to move time without sleeping (a
 * cached statement, a placeholder for it: claim-cache.ts).
 */
export function nowExpr(now: Date | Placeholder | undefined): SQL {
  if (!now) return sql`clock_timestamp()`;
  return sql`${now instanceof Date ? now.toISOString() : now}::timestamptz`;
}

/** Timestamps leave the database as epoch milliseconds: one format for every driver. */
export function epochMs(column: SQL): SQL {
  return sql`(extract(epoch from ${column}) * 1000)::float8`;
}

/** Appends `entry` to a jsonb array, keeping the newest `ERROR_HISTORY` entries. */
export const ERROR_HISTORY = 10;
export function appendCapped(history: SQL, entry: SQL): SQL {
  return sql`jsonb_path_query_array(${history} || jsonb_build_array(${entry}), ${sql.raw(`'$[last-${ERROR_HISTORY - 1} to last]'`)})`;
}

export function toDate(ms: number | null | undefined): Date | null {
  return ms === null || ms === undefined ? null : new Date(ms);
}

/**
 * How many lapsed leases a rescue considers, oldest first. More than it takes: some are skipped
 * (held by another claim, paused, outside their window). The usual claim finds none, whatever this is.
 */
export const lapsedWindow = (limit: number) => Math.max(limit * 4, 500);

/**
 * The ids of the running jobs of `kinds` whose lease ran out by `now`, oldest first (at most
 * `max`), as an array: lapsed_leases walks jobs_lease_idx with a plain index scan. An array (an
 * InitPlan) is computed before the scan of jobs that uses it, so the walk always happens and the
 * jobs are read by primary key; as a joined FROM item, the planner could start from jobs instead
 * and never call it.
 */
export function lapsedLeases(schema: string, now: SQL, kinds: readonly string[], max: number): SQL {
  return sql`array(select ${sql.identifier(schema)}.lapsed_leases(${now}, ${sql.param(kinds)}::text[], ${max}::int))`;
}

/**
 * "The lease ran out", re-checked on the locked row, in a form jobs_lease_idx cannot serve: a plain
 * `lease_expires_at <= now` implies the index's predicate (lease_expires_at is not null), and the
 * planner would read the index again with a bitmap scan (every dead entry) instead of taking the ids
 * lapsedLeases found by primary key. A running row always has a lease (jobs_running_lease_check).
 */
export function leaseRanOut(now: SQL): SQL {
  return sql`coalesce(j.lease_expires_at, 'infinity') <= ${now}`;
}
