import { type SQL, sql } from 'drizzle-orm';
import type { DeclaredRateLimit } from '../../base/controls.js';

export type { DeclaredRateLimit, RateLimitScope } from '../../base/controls.js';

/** A rate set at run time: it overrides the code's rate of the same scope and name. */
export interface RateLimitOverride extends DeclaredRateLimit {
  setAt: Date;
  setBy: string;
  reason: string | null;
}

export const rateLimitsRef = (schema: string) => sql`${sql.identifier(schema)}.rate_limits`;
export const bucketsRef = (schema: string) => sql`${sql.identifier(schema)}.rate_buckets`;
export const ms = (v: SQL) => sql`(${v} * interval '1 millisecond')`;

/** The condition that rate row `l` applies to a claimer of `kinds` in `queues` (a destination's always may). */
function appliesTo(request: { kinds: readonly string[]; queues?: readonly string[] }): SQL {
  const kinds = sql`(l.scope <> 'kind' or l.name = any(${sql.param(request.kinds)}::text[]))`;
  return request.queues
    ? sql`(${kinds} and (l.scope not in ('queue', 'key') or l.name = any(${sql.param(request.queues)}::text[])))`
    : kinds;
}

/**
 * The claim's CTE `rlim` (scope, name, max_starts, period_ms): the rates that apply to this claimer —
 * the declared ones, each replaced by the table's override of the same scope and name, and the
 * table's others. Read once per statement, from a table of a few rows.
 */
export function effectiveRateLimitsCte(
  schema: string,
  request: { declared: readonly DeclaredRateLimit[]; kinds: readonly string[]; queues?: readonly string[] },
): SQL {
  const d = request.declared;
  if (d.length === 0) {
    return sql`rlim as (select l.scope, l.name, l.max_starts, l.period_ms from ${rateLimitsRef(schema)} l
      where ${appliesTo(request)})`;
  }
  return sql`rlim as (
      select l.scope, l.name, l.max_starts, l.period_ms from (
        select coalesce(t.scope, c.scope) as scope, coalesce(t.name, c.name) as name,
          coalesce(t.max_starts, c.max_starts) as max_starts, coalesce(t.period_ms, c.period_ms) as period_ms
        from unnest(${sql.param(d.map((l) => l.scope))}::text[], ${sql.param(d.map((l) => l.name))}::text[],
            ${sql.param(d.map((l) => l.maxStarts))}::int[], ${sql.param(d.map((l) => l.periodMs))}::int[])
            as c(scope, name, max_starts, period_ms)
          full join ${rateLimitsRef(schema)} t on t.scope = c.scope and t.name = c.name
      ) l
      where ${appliesTo(request)}
    )`;
}

/**
 * A lateral subquery (scope, name, key, max_starts, period_ms): the rate scopes a job with these
 * columns starts in — its queue's, its kind's, its concurrency key's, its destination's (the
 * destination's own rate, else `*`'s).
 */
function scopesOf(row: { queue: SQL; kind: SQL; key: SQL; destination: SQL }): SQL {
  return sql`(
      select 'queue'::text as scope, l.name, ''::text as key, l.max_starts, l.period_ms from rlim l
        where l.scope = 'queue' and l.name = ${row.queue}
      union all select 'kind', l.name, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'kind' and l.name = ${row.kind}
      union all select 'key', l.name, ${row.key}, l.max_starts, l.period_ms from rlim l
        where l.scope = 'key' and l.name = ${row.queue} and ${row.key} is not null
      union all (select 'destination', ${row.destination}, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'destination' and ${row.destination} is not null and l.name in (${row.destination}, '*')
        order by l.name = '*' limit 1)
    )`;
}

/** The starts of bucket `b` within the last `period` before `now`: (used, oldest). */
export const recentStarts = (now: SQL, period: SQL) =>
  sql`(select coalesce(sum(x.n), 0) as used, min(x.at) as oldest from unnest(b.starts, b.counts) as x(at, n)
      where x.at > ${now} - ${ms(period)})`;

/**
 * CTE `rate_held` (queues, kinds, destinations, next_at): the scopes whose rate the claim's snapshot
 * sees used up — its candidate scans leave them out, so that their backlog never crowds other work
 * out of a batch (the decision itself is rate_room's) — and when the first of them has room again.
 */
export function rateHeldCte(schema: string, now: SQL): SQL {
  const buckets = bucketsRef(schema);
  return sql`rate_held as (
      select coalesce(array_agg(u.name) filter (where u.scope = 'queue'), '{}') as queues,
        coalesce(array_agg(u.name) filter (where u.scope = 'kind'), '{}') as kinds,
        coalesce(array_agg(u.name) filter (where u.scope = 'destination'), '{}') as destinations,
        min(u.next_at) as next_at
      from (
        select b.scope, b.name, r.oldest + ${ms(sql`l.period_ms`)} as next_at
        from rlim l
        join ${buckets} b on b.scope = l.scope and b.name = l.name and b.key = ''
        cross join lateral ${recentStarts(now, sql`l.period_ms`)} r
        where l.scope in ('queue', 'kind', 'destination') and r.used >= l.max_starts
        union all
        select b.scope, b.name, r.oldest + ${ms(sql`l.period_ms`)}
        from rlim l
        join ${buckets} b on b.scope = 'destination' and b.key = ''
        cross join lateral ${recentStarts(now, sql`l.period_ms`)} r
        where l.scope = 'destination' and l.name = '*' and r.used >= l.max_starts
          and not exists (select 1 from rlim o where o.scope = 'destination' and o.name = b.name)
      ) u
    )`;
}

/** `rate_held` for a claim that applies no rate: nothing held. */
export const noRateHeldCte = () =>
  sql`rate_held as (select '{}'::text[] as queues, '{}'::text[] as kinds, '{}'::text[] as destinations,
    null::timestamptz as next_at)`;

/**
 * A lateral subquery (room, next_at) for the concurrency key `key` of queue `queue`: how many more
 * starts the snapshot sees its per-key rate allow (`fallback` when none applies), and when its next
 * token comes back if none is left. An estimate, for the walk over keys; rate_room decides.
 */
export function keyRateRoom(schema: string, request: { queue: SQL; key: SQL; now: SQL; fallback: SQL }): SQL {
  return sql`(
      select coalesce(min(greatest(l.max_starts - coalesce(r.used, 0), 0)), ${request.fallback}) as room,
        min(case when coalesce(r.used, 0) >= l.max_starts then r.oldest + ${ms(sql`l.period_ms`)} end) as next_at
      from rlim l
      left join ${bucketsRef(schema)} b on b.scope = 'key' and b.name = l.name and b.key = ${request.key}
      left join lateral ${recentStarts(request.now, sql`l.period_ms`)} r on true
      where l.scope = 'key' and l.name = ${request.queue}
    )`;
}

/**
 * CTEs `rate_pairs`, `rate_need`, `rate_rooms` and `rate_blocked` after `cinfo` (id, src, queue,
 * kind, ck, dest, priority, run_at) and `room` (claim_room, whose locks come first): each candidate's
 * rate scopes and its rank in each, rate_room's verdict per scope, and the candidates ranked past
 * their scope's room.
 */
export function rateRoomCtes(schema: string, request: { now: SQL }): SQL {
  const scopes = scopesOf({ queue: sql`c.queue`, kind: sql`c.kind`, key: sql`c.ck`, destination: sql`c.dest` });
  const agg = (col: string, type: string) =>
    sql`(select coalesce(array_agg(${sql.raw(col)}), '{}'::${sql.raw(type)}) from rate_need)`;
  return sql`rate_pairs as (
      select c.id, s.scope, s.name, s.key, s.max_starts, s.period_ms,
        row_number() over (partition by s.scope, s.name, s.key order by c.src, c.priority, c.run_at, c.id) as rank
      from cinfo c cross join lateral ${scopes} s
    ),
    rate_need as (
      select scope, name, key, max(max_starts) as max_starts, max(period_ms) as period_ms, count(*)::int as demand
      from rate_pairs group by scope, name, key
    ),
    rate_rooms as (
      select * from ${sql.identifier(schema)}.rate_room(${agg('scope', 'text[]')}, ${agg('name', 'text[]')},
        ${agg('key', 'text[]')}, ${agg('max_starts', 'int[]')}, ${agg('period_ms', 'int[]')}, ${agg('demand', 'int[]')},
        ${request.now})
      where (select count(*) from room) >= 0
    ),
    rate_blocked as (
      select p.id from rate_pairs p
      left join rate_rooms r on r.rate_scope = p.scope and r.rate_name = p.name and r.rate_key = p.key
      where p.rank > coalesce(r.room, 0)
    )`;
}

/**
 * CTE `rate_taken` (written) after `claimed`: records the starts the claim took in each rate scope
 * (record_rate_starts, under rate_room's locks). The statement must read it, or it never runs.
 */
export function recordRateStartsCte(schema: string, request: { now: SQL }): SQL {
  const scopes = scopesOf({
    queue: sql`c.queue`,
    kind: sql`c.kind`,
    key: sql`c.concurrency_key`,
    destination: sql`c.destination`,
  });
  return sql`rate_taken as (
      select ${sql.identifier(schema)}.record_rate_starts(
        coalesce(array_agg(t.scope), '{}'), coalesce(array_agg(t.name), '{}'), coalesce(array_agg(t.key), '{}'),
        coalesce(array_agg(t.n), '{}'), coalesce(array_agg(t.period_ms), '{}'), ${request.now}) as written
      from (
        select s.scope, s.name, s.key, count(*)::int as n, max(s.period_ms) as period_ms
        from claimed c cross join lateral ${scopes} s
        group by s.scope, s.name, s.key
      ) t
    )`;
}
