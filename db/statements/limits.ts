import { type SQL, sql } from 'drizzle-orm';
import type { DeclaredLimit } from '../../base/controls.js';
import { runningRow } from './common.js';
import { destinationsNeedLimitedClaimAfter, heldDestinationsFrom } from './destinations.js';
import { keyRateRoom, rateRoomCtes } from './rate-limits.js';

export type { DeclaredLimit, LimitScope } from '../../base/controls.js';

/** A limit set at run time: it overrides the code's limit of the same scope and name. */
export interface LimitOverride extends DeclaredLimit {
  setAt: Date;
  setBy: string;
  reason: string | null;
}

export const limitsRef = (schema: string) => sql`${sql.identifier(schema)}.limits`;

/**
 * The condition that limit row `l` (scope, name) applies to a claimer of `kinds` in `queues`.
 */
function appliesTo(request: { kinds: readonly string[]; queues?: readonly string[] }): SQL {
  return request.queues
    ? sql`((l.scope = 'kind' and l.name = any(${sql.param(request.kinds)}::text[]))
        or (l.scope <> 'kind' and l.name = any(${sql.param(request.queues)}::text[])))`
    : sql`(l.scope <> 'kind' or l.name = any(${sql.param(request.kinds)}::text[]))`;
}

/**
 * The claim's CTE `lim` (scope, name, max_running): the limits that apply to this claimer — the
 * declared ones, each replaced by the table's override of the same scope and name, and the table's
 * other limits on the claimer's queues and kinds. Read once per statement, from a table of a few rows.
 */
export function effectiveLimitsCte(
  schema: string,
  request: { declared: readonly DeclaredLimit[]; kinds: readonly string[]; queues?: readonly string[] },
): SQL {
  const d = request.declared;
  if (d.length === 0) {
    return sql`lim as (select l.scope, l.name, l.max_running from ${limitsRef(schema)} l where ${appliesTo(request)})`;
  }
  return sql`lim as (
      select l.scope, l.name, l.max_running from (
        select coalesce(t.scope, c.scope) as scope, coalesce(t.name, c.name) as name,
          coalesce(t.max_running, c.max_running) as max_running
        from unnest(${sql.param(d.map((l) => l.scope))}::text[], ${sql.param(d.map((l) => l.name))}::text[],
            ${sql.param(d.map((l) => l.maxRunning))}::int[]) as c(scope, name, max_running)
          full join ${limitsRef(schema)} t on t.scope = c.scope and t.name = c.name
      ) l
      where ${appliesTo(request)}
    )`;
}

/**
 * The claim's CTE `shape` (needed, rated, ordered): whether this claimer needs a richer claim than the
 * one sent — the limited one when a limit or a rate applies to its queues or kinds (none is declared:
 * the caller sends the limited claim when the code declares one), a job with a concurrency key waits
 * or a destination holds work back; the rated one when a rate applies; the ordered one when a job with
 * an ordering key is unfinished. The probes are claim_guard()'s (planned once per session); a settle
 * that carries attempts against destinations may open a breaker, so then the destinations are asked
 * after it (`afterSettle`), with held_destinations' own snapshot.
 */
export function claimShapeCte(
  schema: string,
  request: { kinds: readonly string[]; queues?: readonly string[]; now: SQL; afterSettle?: SQL },
): SQL {
  const queues = request.queues ? sql`${sql.param(request.queues)}::text[]` : sql`null::text[]`;
  const guard = sql`${sql.identifier(schema)}.claim_guard(${sql.param(request.kinds)}::text[], ${queues}, ${request.now}, ${
    request.afterSettle ? sql`false` : sql`true`
  })`;
  const needed = request.afterSettle
    ? sql`g.needed or ${destinationsNeedLimitedClaimAfter(schema, request.now, request.afterSettle)}`
    : sql`g.needed`;
  return sql`shape as (select ${needed} as needed, g.rated, g.ordered from ${guard} g)`;
}

/**
 * The claim's CTE `held` (queues, kinds, destinations, probing, rate_next_at): the names its
 * candidate scans leave out — paused ones, those a limit already fills and those whose rate is used
 * up as far as the claim's snapshot sees (`rate_held`), so that a full queue's backlog never crowds
 * another queue out of a batch (the decision itself is claim_room's and rate_room's), and the
 * destinations a breaker holds. One row, computed once: each candidate is compared with small
 * arrays. `notEnding` leaves out the running rows `r` the statement itself ends (its settle), which
 * its snapshot still sees running.
 */
export function heldCte(
  schema: string,
  paused: (scope: 'queue' | 'kind') => SQL,
  notEnding: SQL,
  destinations: { now: SQL; gate: SQL },
): SQL {
  const full = (scope: 'queue' | 'kind') => sql`coalesce((select array_agg(l.name) from lim l
      where l.scope = ${scope} and (select count(*) from (select 1 from ${sql.identifier(schema)}.jobs r
        where ${runningRow('r')} and r.${sql.raw(scope)} = l.name ${notEnding} limit l.max_running) x) >= l.max_running),
      '{}'::text[])`;
  return sql`held as (
      select ${paused('queue')} || ${full('queue')} || rh.queues as queues,
        ${paused('kind')} || ${full('kind')} || rh.kinds as kinds,
        x.blocked || rh.destinations as destinations, x.probing, rh.next_at as rate_next_at
      from (select * from ${heldDestinationsFrom(schema, destinations.now, destinations.gate)}) x cross join rate_held rh
    )`;
}

/**
 * The condition that job `j` is in no held queue and of no held kind. `|| ''` hides the columns'
 * statistics from the planner, as in notPaused (pauses.ts). A function: a sql`` built at import
 * time breaks a bundled function (see pauses.ts).
 */
export const notHeld = () => sql`(j.queue || '') <> all(coalesce((select h.queues from held h), '{}'::text[]))
  and (j.kind || '') <> all(coalesce((select h.kinds from held h), '{}'::text[])) and ${destinationOpen()}`;

/**
 * The condition that job `j` has no destination, or one whose breaker lets it through: closed, or
 * its cool-down over (then one job of it goes, the probe: see probe_pick), no Retry-After defers
 * it, and its rate is not used up.
 */
export const destinationOpen = () =>
  sql`(j.destination is null or (j.destination || '') <> all(coalesce((select h.destinations from held h), '{}'::text[])))`;

/**
 * CTEs `key_walk_a`, `key_walk_b`, `walked`, `key_rate`, `key_room_seen`, `key_share` and `keyed`:
 * the claim's candidates that have a concurrency key, key by key. The walk steps from key to key
 * along jobs_keyed_idx (one index probe per key, however many jobs a key holds), in hash order from
 * `start`, wrapping round. At each key it counts the key's room as the snapshot sees it (its queue's
 * per-key limit less its running jobs; the batch when the queue has none) and, when the queue has a
 * per-key limit, tries the key's advisory lock (claim_room's, held to the commit): a key another
 * claim holds is passed over, so concurrent claims spread over different keys instead of each
 * locking candidates that claim_room then gives no room. The walk stops once the keys it took can
 * fill the batch (a limited key counts its room, a key without a limit one job: `limit` / `maxKeys`
 * rounded up), at `maxKeys` keys taken, or at twice that many visited.
 * Each key taken then gives up to its share: the smallest equal share that fills the batch, where a
 * key with less room gives what it has (key_share). So a key with 100,000 ready jobs takes one share
 * like a key with ten, and a claim never walks one key's backlog row by row. When every key with
 * room is held by other claims, the claim takes candidates from those anyway and claim_room waits
 * for the first (a claim never comes back empty only because others held its keys).
 * `runnable` is the claim's condition on `j`.
 */
export function keyedCtes(
  schema: string,
  request: {
    limit: number;
    maxKeys: number;
    start: number;
    runnable: SQL;
    notEnding: SQL;
    now: SQL;
    rated: boolean;
    gate: SQL;
  },
): SQL {
  const jobs = sql`${sql.identifier(schema)}.jobs`;
  // The walk locks keys out of claim_room's order, so only a claim that then waits for no lock may:
  // one that no queue, kind or rate limit concerns (claim_room and rate_room wait for those). One that
  // does walks without locking, as every claim once did. The walk waits for the statement's settle,
  // which may wait for row locks: it holds no advisory lock until then.
  const mayLock = request.rated
    ? sql`false`
    : sql`(${request.gate} and not exists (select 1 from lim l where l.scope <> 'key'))`;
  const keyCols = sql`hashtext(j.concurrency_key), j.queue, j.concurrency_key`;
  const keyed = sql`j.state = 'queued' and j.concurrency_key is not null`;
  const maxKeys = Math.max(1, Math.round(request.maxKeys));
  const maxSteps = 2 * maxKeys;
  const limit = sql`${request.limit}::bigint`;
  // What a key without a per-key limit counts toward filling the batch: the walk then visits up to
  // maxKeys keys, and each takes an equal share of the batch.
  const unit = Math.ceil(request.limit / maxKeys);
  // (offset 0 keeps each level a subquery of its own: pulled up, the room's count ran once for
  // each of its four uses.)
  // One walked key's state: room (snapshot), whether this claim takes it (room, and claim_room's lock
  // for the key when its queue has a per-key limit; the schema written as the migration writes it),
  // and what it counts toward filling the batch (c).
  const state = (x: string) => {
    const q = sql.raw(`${x}.q`);
    const k = sql.raw(`${x}.k`);
    return sql`cross join lateral (
        select rr.room, rr.mine, case when not rr.mine then 0 when rr.limited then rr.room else least(rr.room, ${unit}) end as c
        from (
          select rl.room, rl.limited,
            case when rl.room > 0 and rl.limited and ${mayLock}
              then pg_try_advisory_xact_lock(hashtextextended(${`"${schema}"`}::text || chr(31) || 'key' || chr(31) || ${q} || chr(31) || ${k}, 0))
              else rl.room > 0 end as mine
          from (
            select exists (select 1 from lim l where l.scope = 'key' and l.name = ${q}) as limited,
              coalesce((select greatest(l.max_running - (select count(*) from (
                  select 1 from ${jobs} r
                  where r.state = 'running' and r.queue = ${q} and r.concurrency_key = ${k} ${request.notEnding}
                  limit l.max_running) n), 0)
                from lim l where l.scope = 'key' and l.name = ${q}), ${limit}) as room
            offset 0
          ) rl
          offset 0
        ) rr
      ) y`;
  };
  const step = (from: string) => sql`select x.h, x.q, x.k, w.m + 1, w.n + y.mine::int, w.filled + y.c, y.mine, y.room
      from ${sql.raw(from)} w cross join lateral (
        select ${keyCols} from ${jobs} j
        where ${keyed} and (${keyCols}) > (w.h, w.q, w.k)
        order by ${keyCols} limit 1) x(h, q, k)
      ${state('x')}`;
  // key_room_seen: the keys this claim takes candidates from, each with its room — those it took, or
  // when every key with room is another claim's, those (claim_room waits for them). key_share: the
  // smallest s with sum(least(room, s)) >= the batch over those keys (the largest room when even that
  // falls short), so a key with less room than an equal share leaves the rest to the others instead
  // of to nobody. With rooms r1 <= r2 <= …, s lies in (r(i-1), r(i)] for the first key i at which the
  // keys from i on, each taking s, fill what the keys before it (each taking its whole room) leave.
  const goOn = (w: string) =>
    sql`${sql.raw(w)}.filled < ${limit} and ${sql.raw(w)}.n < ${maxKeys} and ${sql.raw(w)}.m < ${maxSteps}`;
  return sql`key_walk_a(h, q, k, m, n, filled, mine, room) as (
      (select x.h, x.q, x.k, 1, y.mine::int, y.c, y.mine, y.room
        from (select ${keyCols} from ${jobs} j
          where ${keyed} and hashtext(j.concurrency_key) >= ${request.start}::int
          order by ${keyCols} limit 1) x(h, q, k)
        ${state('x')})
      union all
      ${step('key_walk_a')} where ${goOn('w')}
    ),
    walk_a_end as (
      select coalesce((select ${goOn('a')} from key_walk_a a order by a.m desc limit 1), true) as go_on,
        coalesce((select max(a.m) from key_walk_a a), 0) as m, coalesce((select max(a.n) from key_walk_a a), 0) as n,
        coalesce((select max(a.filled) from key_walk_a a), 0) as filled
    ),
    key_walk_b(h, q, k, m, n, filled, mine, room) as (
      (select x.h, x.q, x.k, e.m + 1, e.n + y.mine::int, e.filled + y.c, y.mine, y.room
        from walk_a_end e cross join lateral (select ${keyCols} from ${jobs} j
          where ${keyed} and hashtext(j.concurrency_key) < ${request.start}::int
          order by ${keyCols} limit 1) x(h, q, k)
        ${state('x')}
        where e.go_on)
      union all
      ${step('key_walk_b')} where ${goOn('w')} and x.h < ${request.start}::int
    ),
    walked as (
      select h, q, k, mine, room from key_walk_a union all select h, q, k, mine, room from key_walk_b
    ),
    -- Each key's room under its per-key rate, as the snapshot sees it (rate_room decides).
    key_rate as (${
      request.rated
        ? sql`select w.h, w.q, w.k, w.mine, w.room as seen, kr.room, kr.next_at from walked w
      cross join lateral ${keyRateRoom(schema, { queue: sql`w.q`, key: sql`w.k`, now: request.now, fallback: limit })} kr`
        : sql`select w.h, w.q, w.k, w.mine, w.room as seen, ${limit} as room, null::timestamptz as next_at from walked w`
    }),
    key_room_seen as (
      select w.h, w.q, w.k, least(w.room, w.seen) as room from key_rate w
      where w.seen > 0 and (w.mine or not exists (select 1 from walked m where m.mine))
    ),
    key_share as (
      select coalesce(min(s.share) filter (where s.share <= s.room), max(s.room), 0) as share from (
        select r.room, greatest(coalesce(r.prev, 0) + 1,
            ceil((${limit} - r.below)::numeric / (r.n - r.i + 1))::bigint) as share
        from (
          select room, lag(room) over o as prev, row_number() over o as i, count(*) over () as n,
            coalesce(sum(room) over (o rows between unbounded preceding and 1 preceding), 0) as below
          from key_room_seen window o as (order by room)
        ) r
      ) s
    ),
    keyed as (
      select c.id from key_room_seen w
      cross join lateral (
        select j.id from ${jobs} j
        where ${keyed} and hashtext(j.concurrency_key) = w.h and j.queue = w.q and j.concurrency_key = w.k
          and ${request.runnable}
        order by j.priority, j.run_at, j.id
        limit least(w.room, (select share from key_share))
        for update skip locked
      ) c
      where w.room > 0
    )`;
}

/**
 * CTEs `cinfo`, `need`, `room`, the rate CTEs and `within` after the candidate CTEs: which
 * candidates (`cands`: id, src — 1 lane, 2 head or keyed; and rescues, `expired`, as src 0) fit their
 * limits and rates, at most `limit`, rescues first. claim_room locks every limited scope the new
 * starts touch and counts its running jobs afresh (see migration 0012); rate_room does the same for
 * every rate scope, rescues included (migration 0015). A candidate is taken when, in each of its
 * scopes, fewer candidates come before it than the scope has room (a rescue starts no new running
 * job: no concurrency limit holds it back). `gate` makes the count wait for the statement's own
 * settle (so jobs it just ended free their places). `takes`, when given, is the one-time condition
 * that the claim takes anything at all: `within` is what the claim takes, and the probe turns
 * (claimProbeCtes) are asked for from it, so a claim that takes nothing must find it empty.
 */
export function withinLimitsCtes(
  schema: string,
  request: { limit: number; gate: SQL; now: SQL; rated: boolean; takes?: SQL },
): SQL {
  const jobs = sql`${sql.identifier(schema)}.jobs`;
  const order = sql`c.src, c.priority, c.run_at, c.id`;
  // Ranks among new starts only (ids are unique: the frame ends at the row itself).
  const upToHere = sql`rows between unbounded preceding and current row`;
  const takes = request.takes
    ? sql`
        and ${request.takes}`
    : sql``;
  // scope_room: the queues' and kinds' rooms apart from the keys': each candidate is joined with these
  // few rows. Joined with room itself, each of 500 candidates scanned 500 keys' rows twice (a third of
  // the statement's time at 1,000 keys).
  // cinfo reads by primary key: joined alone, the planner may hash the whole table to find the candidates.
  // probe_pick: a destination whose breaker's cool-down ended lets one job through, its probe: of its
  // candidates (an expired lease first: a probe whose invocation died), the first; the claim asks
  // claim_probes for the turn only if that job survives the limits and the batch (claimProbeCtes).
  // key_room: the keys' rooms as one object, looked up per candidate: a join on (queue, key) was
  // planned as a merge on the queue alone, comparing every candidate with every key (250,000 pairs, 150 ms).
  // (Notes here, not in the statement: its text is in the worker's bundle.)
  return sql`cinfo as (
      select c.src, j.id, j.queue, j.kind, j.concurrency_key as ck, j.priority, j.run_at, j.destination as dest
      from (select id, src from cands union all select id, 0 from expired) c join ${jobs} j on j.id = c.id
      where j.id = any(array(select id from cands union all select id from expired))
    ),
    probe_pick as (
      select distinct on (c.dest) c.dest, c.id, c.kind from cinfo c
      where c.dest = any(coalesce((select h.probing from held h), '{}'::text[])) and ${request.gate}
      order by c.dest, c.src, c.priority, c.run_at, c.id
    ),
    need as (
      select l.scope, l.name, null::text as key, l.max_running from lim l
      where l.scope <> 'key' and ${request.gate}
        and exists (select 1 from cinfo c
          where c.src > 0 and (case l.scope when 'queue' then c.queue else c.kind end) = l.name)
      union all
      select 'key', c.queue, c.ck, l.max_running from cinfo c join lim l on l.scope = 'key' and l.name = c.queue
      where c.src > 0 and c.ck is not null and ${request.gate}
      group by c.queue, c.ck, l.max_running
    ),
    room as (
      select * from ${sql.identifier(schema)}.claim_room(
        (select coalesce(array_agg(scope), '{}') from need), (select coalesce(array_agg(name), '{}') from need),
        (select coalesce(array_agg(key), '{}') from need), (select coalesce(array_agg(max_running), '{}') from need))
    ),
    key_room as (
      select coalesce(jsonb_object_agg(y.limit_name || chr(31) || y.limit_key, y.room), '{}'::jsonb) as m
      from room y where y.limit_scope = 'key'
    ),
    scope_room as (select y.limit_scope, y.limit_name, y.room from room y where y.limit_scope <> 'key'),
    ${request.rated ? sql`${rateRoomCtes(schema, { now: request.now })},` : sql``}
    within as (
      select r.id from (
        select c.*,
          count(*) filter (where c.src > 0) over (partition by c.queue order by ${order} ${upToHere}) as in_queue,
          count(*) filter (where c.src > 0) over (partition by c.kind order by ${order} ${upToHere}) as in_kind,
          count(*) filter (where c.src > 0) over (partition by c.queue, c.ck order by ${order} ${upToHere}) as in_key
        from cinfo c
      ) r
      left join scope_room q on q.limit_scope = 'queue' and q.limit_name = r.queue
      left join scope_room k on k.limit_scope = 'kind' and k.limit_name = r.kind
      where (r.src = 0 or (r.in_queue <= coalesce(q.room, r.in_queue) and r.in_kind <= coalesce(k.room, r.in_kind)
        and (r.ck is null
          or r.in_key <= coalesce(((select m from key_room) ->> (r.queue || chr(31) || r.ck))::int, r.in_key))))
        ${request.rated ? sql`and r.id not in (select b.id from rate_blocked b)` : sql``}
        and (r.dest is null or r.dest <> all(coalesce((select h.probing from held h), '{}'::text[]))
          or r.id in (select p.id from probe_pick p))${takes}
      order by r.src, r.priority, r.run_at, r.id
      limit ${request.limit}
    )`;
}
