-- claim shape "rated": a rate limit declared: rate_room decides, record_rate_starts writes the starts
with recursive clock as (select clock_timestamp() as now),

    settle_input as (select r.id, ($1::uuid[])[r.t] as token
    from unnest(string_to_array($2, ',')::bigint[], string_to_array($3, ',')::int[]) as r(id, t)), settled as (update "skiplock".jobs j set
      lease_token = r.token,
      state = (case
    when r.outcome = 'completed' then 'completed'
    when r.outcome = 'cancelled' then 'cancelled'
    when r.outcome = 'retry' and not (r.outcome = 'retry' and j.attempt >= j.max_attempts) then 'queued'
    else 'dead'
  end),
      dead_reason = case
        when r.outcome = 'dead' then coalesce(r.reason, 'discarded')
        when (r.outcome = 'retry' and j.attempt >= j.max_attempts) then 'max_attempts'
      end,
      run_at = case when (case
    when r.outcome = 'completed' then 'completed'
    when r.outcome = 'cancelled' then 'cancelled'
    when r.outcome = 'retry' and not (r.outcome = 'retry' and j.attempt >= j.max_attempts) then 'queued'
    else 'dead'
  end) = 'queued'
        then greatest((select now from clock) + r.delay_ms * interval '1 millisecond', case when r.after_lease then j.lease_expires_at end)
        else j.run_at end,
      finished_at = case when (case
    when r.outcome = 'completed' then 'completed'
    when r.outcome = 'cancelled' then 'cancelled'
    when r.outcome = 'retry' and not (r.outcome = 'retry' and j.attempt >= j.max_attempts) then 'queued'
    else 'dead'
  end) = 'queued' then null else (select now from clock) end,
      lease_expires_at = null,
      result = case when r.outcome = 'completed' then r.result else j.result end,
      last_error = coalesce(r.error, j.last_error),
      errors = case when r.error is null then j.errors else jsonb_path_query_array(j.errors || jsonb_build_array(r.error), '$[last-9 to last]') end,
      updated_at = (select now from clock)
    from jsonb_to_recordset($4::jsonb)
      as r(id bigint, token uuid, outcome text, delay_ms bigint, after_lease boolean, reason text, error jsonb,
        result jsonb)
    where j.id = r.id and j.id = any(array(select id from settle_input)) and j.lease_token = r.token and (case when j.state = 'running' then true end)
    returning j.id, j.state, j.dead_reason, j.run_at, j.dependents is not null as parent),
      settle_done as (select (select count(*) from settled) as n),
    shape as (select g.needed as needed, g.rated, g.ordered from "skiplock".claim_guard($5::text[], null::text[], (select now from clock), true) g),
    lim as (select l.scope, l.name, l.max_running from "skiplock".limits l where (l.scope <> 'kind' or l.name = any($6::text[]))),
    rlim as (
      select l.scope, l.name, l.max_starts, l.period_ms from (
        select coalesce(t.scope, c.scope) as scope, coalesce(t.name, c.name) as name,
          coalesce(t.max_starts, c.max_starts) as max_starts, coalesce(t.period_ms, c.period_ms) as period_ms
        from unnest($7::text[], $8::text[],
            $9::int[], $10::int[])
            as c(scope, name, max_starts, period_ms)
          full join "skiplock".rate_limits t on t.scope = c.scope and t.name = c.name
      ) l
      where (l.scope <> 'kind' or l.name = any($11::text[]))
    ),
    rate_held as (
      select coalesce(array_agg(u.name) filter (where u.scope = 'queue'), '{}') as queues,
        coalesce(array_agg(u.name) filter (where u.scope = 'kind'), '{}') as kinds,
        coalesce(array_agg(u.name) filter (where u.scope = 'destination'), '{}') as destinations,
        min(u.next_at) as next_at
      from (
        select b.scope, b.name, r.oldest + (l.period_ms * interval '1 millisecond') as next_at
        from rlim l
        join "skiplock".rate_buckets b on b.scope = l.scope and b.name = l.name and b.key = ''
        cross join lateral (select coalesce(sum(x.n), 0) as used, min(x.at) as oldest from unnest(b.starts, b.counts) as x(at, n)
      where x.at > (select now from clock) - (l.period_ms * interval '1 millisecond')) r
        where l.scope in ('queue', 'kind', 'destination') and r.used >= l.max_starts
        union all
        select b.scope, b.name, r.oldest + (l.period_ms * interval '1 millisecond')
        from rlim l
        join "skiplock".rate_buckets b on b.scope = 'destination' and b.key = ''
        cross join lateral (select coalesce(sum(x.n), 0) as used, min(x.at) as oldest from unnest(b.starts, b.counts) as x(at, n)
      where x.at > (select now from clock) - (l.period_ms * interval '1 millisecond')) r
        where l.scope = 'destination' and l.name = '*' and r.used >= l.max_starts
          and not exists (select 1 from rlim o where o.scope = 'destination' and o.name = b.name)
      ) u
    ),
    held as (
      select (select "skiplock".paused_names($12::text))::text[] || coalesce((select array_agg(l.name) from lim l
      where l.scope = $13 and (select count(*) from (select 1 from "skiplock".jobs r
        where r.state = 'running' and r.lease_expires_at is not null and r.queue = l.name and r.id not in (select id from settle_input) limit l.max_running) x) >= l.max_running),
      '{}'::text[]) || rh.queues as queues,
        (select "skiplock".paused_names($14::text))::text[] || coalesce((select array_agg(l.name) from lim l
      where l.scope = $15 and (select count(*) from (select 1 from "skiplock".jobs r
        where r.state = 'running' and r.lease_expires_at is not null and r.kind = l.name and r.id not in (select id from settle_input) limit l.max_running) x) >= l.max_running),
      '{}'::text[]) || rh.kinds as kinds,
        x.blocked || rh.destinations as destinations, x.probing, rh.next_at as rate_next_at
      from (select * from "skiplock".held_destinations((select now from clock)) x where (select n from settle_done) >= 0) x cross join rate_held rh
    ),

    ready as (
      select j.id from "skiplock".jobs j
      where j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($16::text[])
    and (j.queue || '') <> all(coalesce((select h.queues from held h), '{}'::text[]))
  and (j.kind || '') <> all(coalesce((select h.kinds from held h), '{}'::text[])) and (j.destination is null or (j.destination || '') <> all(coalesce((select h.destinations from held h), '{}'::text[]))) and (j.ordering_key is null or (
    not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.state = 'running' and o.id <> j.id)
    and not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.id < j.id and ((o.finished_at is null and o.run_at <> 'infinity') or (o.dead_reason is not null and o.ordering_hold)))))  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled'))))) and (select n from settle_done) >= 0 and j.concurrency_key is null
      order by j.priority, j.run_at, j.id
      limit $17
      for update skip locked
    ),
    expired as (
      select j.id from "skiplock".jobs j
      where j.id = any(array(select "skiplock".lapsed_leases((select now from clock), $18::text[], $19::int)))
        and j.state = 'running' and coalesce(j.lease_expires_at, 'infinity') <= (select now from clock) and j.attempt < j.max_attempts
        and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($20::text[])  and (j.queue || '') <> all((select "skiplock".paused_names($21::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($22::text))::text[]) and (j.ordering_key is null or (
    not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.state = 'running' and o.id <> j.id)
    and not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.id < j.id and ((o.finished_at is null and o.run_at <> 'infinity') or (o.dead_reason is not null and o.ordering_hold)))))  and j.id not in (select id from settle_input) and (select n from settle_done) >= 0
        and (j.destination is null or (j.destination || '') <> all(coalesce((select h.destinations from held h), '{}'::text[])))
      order by j.lease_expires_at
      limit $23
      for update skip locked
    ),
    key_walk_a(h, q, k, m, n, filled, mine, room) as (
      (select x.h, x.q, x.k, 1, y.mine::int, y.c, y.mine, y.room
        from (select hashtext(j.concurrency_key), j.queue, j.concurrency_key from "skiplock".jobs j
          where j.state = 'queued' and j.concurrency_key is not null and hashtext(j.concurrency_key) >= $24::int
          order by hashtext(j.concurrency_key), j.queue, j.concurrency_key limit 1) x(h, q, k)
        cross join lateral (
        select rr.room, rr.mine, case when not rr.mine then 0 when rr.limited then rr.room else least(rr.room, $25) end as c
        from (
          select rl.room, rl.limited,
            case when rl.room > 0 and rl.limited and false
              then pg_try_advisory_xact_lock(hashtextextended($26::text || chr(31) || 'key' || chr(31) || x.q || chr(31) || x.k, 0))
              else rl.room > 0 end as mine
          from (
            select exists (select 1 from lim l where l.scope = 'key' and l.name = x.q) as limited,
              coalesce((select greatest(l.max_running - (select count(*) from (
                  select 1 from "skiplock".jobs r
                  where r.state = 'running' and r.queue = x.q and r.concurrency_key = x.k and r.id not in (select id from settle_input)
                  limit l.max_running) n), 0)
                from lim l where l.scope = 'key' and l.name = x.q), $27::bigint) as room
            offset 0
          ) rl
          offset 0
        ) rr
      ) y)
      union all
      select x.h, x.q, x.k, w.m + 1, w.n + y.mine::int, w.filled + y.c, y.mine, y.room
      from key_walk_a w cross join lateral (
        select hashtext(j.concurrency_key), j.queue, j.concurrency_key from "skiplock".jobs j
        where j.state = 'queued' and j.concurrency_key is not null and (hashtext(j.concurrency_key), j.queue, j.concurrency_key) > (w.h, w.q, w.k)
        order by hashtext(j.concurrency_key), j.queue, j.concurrency_key limit 1) x(h, q, k)
      cross join lateral (
        select rr.room, rr.mine, case when not rr.mine then 0 when rr.limited then rr.room else least(rr.room, $28) end as c
        from (
          select rl.room, rl.limited,
            case when rl.room > 0 and rl.limited and false
              then pg_try_advisory_xact_lock(hashtextextended($29::text || chr(31) || 'key' || chr(31) || x.q || chr(31) || x.k, 0))
              else rl.room > 0 end as mine
          from (
            select exists (select 1 from lim l where l.scope = 'key' and l.name = x.q) as limited,
              coalesce((select greatest(l.max_running - (select count(*) from (
                  select 1 from "skiplock".jobs r
                  where r.state = 'running' and r.queue = x.q and r.concurrency_key = x.k and r.id not in (select id from settle_input)
                  limit l.max_running) n), 0)
                from lim l where l.scope = 'key' and l.name = x.q), $30::bigint) as room
            offset 0
          ) rl
          offset 0
        ) rr
      ) y where w.filled < $31::bigint and w.n < $32 and w.m < $33
    ),
    walk_a_end as (
      select coalesce((select a.filled < $34::bigint and a.n < $35 and a.m < $36 from key_walk_a a order by a.m desc limit 1), true) as go_on,
        coalesce((select max(a.m) from key_walk_a a), 0) as m, coalesce((select max(a.n) from key_walk_a a), 0) as n,
        coalesce((select max(a.filled) from key_walk_a a), 0) as filled
    ),
    key_walk_b(h, q, k, m, n, filled, mine, room) as (
      (select x.h, x.q, x.k, e.m + 1, e.n + y.mine::int, e.filled + y.c, y.mine, y.room
        from walk_a_end e cross join lateral (select hashtext(j.concurrency_key), j.queue, j.concurrency_key from "skiplock".jobs j
          where j.state = 'queued' and j.concurrency_key is not null and hashtext(j.concurrency_key) < $37::int
          order by hashtext(j.concurrency_key), j.queue, j.concurrency_key limit 1) x(h, q, k)
        cross join lateral (
        select rr.room, rr.mine, case when not rr.mine then 0 when rr.limited then rr.room else least(rr.room, $38) end as c
        from (
          select rl.room, rl.limited,
            case when rl.room > 0 and rl.limited and false
              then pg_try_advisory_xact_lock(hashtextextended($39::text || chr(31) || 'key' || chr(31) || x.q || chr(31) || x.k, 0))
              else rl.room > 0 end as mine
          from (
            select exists (select 1 from lim l where l.scope = 'key' and l.name = x.q) as limited,
              coalesce((select greatest(l.max_running - (select count(*) from (
                  select 1 from "skiplock".jobs r
                  where r.state = 'running' and r.queue = x.q and r.concurrency_key = x.k and r.id not in (select id from settle_input)
                  limit l.max_running) n), 0)
                from lim l where l.scope = 'key' and l.name = x.q), $40::bigint) as room
            offset 0
          ) rl
          offset 0
        ) rr
      ) y
        where e.go_on)
      union all
      select x.h, x.q, x.k, w.m + 1, w.n + y.mine::int, w.filled + y.c, y.mine, y.room
      from key_walk_b w cross join lateral (
        select hashtext(j.concurrency_key), j.queue, j.concurrency_key from "skiplock".jobs j
        where j.state = 'queued' and j.concurrency_key is not null and (hashtext(j.concurrency_key), j.queue, j.concurrency_key) > (w.h, w.q, w.k)
        order by hashtext(j.concurrency_key), j.queue, j.concurrency_key limit 1) x(h, q, k)
      cross join lateral (
        select rr.room, rr.mine, case when not rr.mine then 0 when rr.limited then rr.room else least(rr.room, $41) end as c
        from (
          select rl.room, rl.limited,
            case when rl.room > 0 and rl.limited and false
              then pg_try_advisory_xact_lock(hashtextextended($42::text || chr(31) || 'key' || chr(31) || x.q || chr(31) || x.k, 0))
              else rl.room > 0 end as mine
          from (
            select exists (select 1 from lim l where l.scope = 'key' and l.name = x.q) as limited,
              coalesce((select greatest(l.max_running - (select count(*) from (
                  select 1 from "skiplock".jobs r
                  where r.state = 'running' and r.queue = x.q and r.concurrency_key = x.k and r.id not in (select id from settle_input)
                  limit l.max_running) n), 0)
                from lim l where l.scope = 'key' and l.name = x.q), $43::bigint) as room
            offset 0
          ) rl
          offset 0
        ) rr
      ) y where w.filled < $44::bigint and w.n < $45 and w.m < $46 and x.h < $47::int
    ),
    walked as (
      select h, q, k, mine, room from key_walk_a union all select h, q, k, mine, room from key_walk_b
    ),
    -- Each key's room under its per-key rate, as the snapshot sees it (rate_room decides).
    key_rate as (select w.h, w.q, w.k, w.mine, w.room as seen, kr.room, kr.next_at from walked w
      cross join lateral (
      select coalesce(min(greatest(l.max_starts - coalesce(r.used, 0), 0)), $48::bigint) as room,
        min(case when coalesce(r.used, 0) >= l.max_starts then r.oldest + (l.period_ms * interval '1 millisecond') end) as next_at
      from rlim l
      left join "skiplock".rate_buckets b on b.scope = 'key' and b.name = l.name and b.key = w.k
      left join lateral (select coalesce(sum(x.n), 0) as used, min(x.at) as oldest from unnest(b.starts, b.counts) as x(at, n)
      where x.at > (select now from clock) - (l.period_ms * interval '1 millisecond')) r on true
      where l.scope = 'key' and l.name = w.q
    ) kr),
    key_room_seen as (
      select w.h, w.q, w.k, least(w.room, w.seen) as room from key_rate w
      where w.seen > 0 and (w.mine or not exists (select 1 from walked m where m.mine))
    ),
    key_share as (
      select coalesce(min(s.share) filter (where s.share <= s.room), max(s.room), 0) as share from (
        select r.room, greatest(coalesce(r.prev, 0) + 1,
            ceil(($49::bigint - r.below)::numeric / (r.n - r.i + 1))::bigint) as share
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
        select j.id from "skiplock".jobs j
        where j.state = 'queued' and j.concurrency_key is not null and hashtext(j.concurrency_key) = w.h and j.queue = w.q and j.concurrency_key = w.k
          and j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($50::text[])
    and (j.queue || '') <> all(coalesce((select h.queues from held h), '{}'::text[]))
  and (j.kind || '') <> all(coalesce((select h.kinds from held h), '{}'::text[])) and (j.destination is null or (j.destination || '') <> all(coalesce((select h.destinations from held h), '{}'::text[]))) and (j.ordering_key is null or (
    not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.state = 'running' and o.id <> j.id)
    and not exists (
      select 1 from "skiplock".jobs o
      where o.ordering_key = j.ordering_key and o.id < j.id and ((o.finished_at is null and o.run_at <> 'infinity') or (o.dead_reason is not null and o.ordering_hold)))))  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled'))))) and (select n from settle_done) >= 0
        order by j.priority, j.run_at, j.id
        limit least(w.room, (select share from key_share))
        for update skip locked
      ) c
      where w.room > 0
    ),
    cands as (

      select id, 2 as src from ready union all select id, 2 from keyed
    ),
    cinfo as (
      select c.src, j.id, j.queue, j.kind, j.concurrency_key as ck, j.priority, j.run_at, j.destination as dest
      from (select id, src from cands union all select id, 0 from expired) c join "skiplock".jobs j on j.id = c.id
      where j.id = any(array(select id from cands union all select id from expired))
    ),
    probe_pick as (
      select distinct on (c.dest) c.dest, c.id, c.kind from cinfo c
      where c.dest = any(coalesce((select h.probing from held h), '{}'::text[])) and (select n from settle_done) >= 0
      order by c.dest, c.src, c.priority, c.run_at, c.id
    ),
    need as (
      select l.scope, l.name, null::text as key, l.max_running from lim l
      where l.scope <> 'key' and (select n from settle_done) >= 0
        and exists (select 1 from cinfo c
          where c.src > 0 and (case l.scope when 'queue' then c.queue else c.kind end) = l.name)
      union all
      select 'key', c.queue, c.ck, l.max_running from cinfo c join lim l on l.scope = 'key' and l.name = c.queue
      where c.src > 0 and c.ck is not null and (select n from settle_done) >= 0
      group by c.queue, c.ck, l.max_running
    ),
    room as (
      select * from "skiplock".claim_room(
        (select coalesce(array_agg(scope), '{}') from need), (select coalesce(array_agg(name), '{}') from need),
        (select coalesce(array_agg(key), '{}') from need), (select coalesce(array_agg(max_running), '{}') from need))
    ),
    key_room as (
      select coalesce(jsonb_object_agg(y.limit_name || chr(31) || y.limit_key, y.room), '{}'::jsonb) as m
      from room y where y.limit_scope = 'key'
    ),
    scope_room as (select y.limit_scope, y.limit_name, y.room from room y where y.limit_scope <> 'key'),
    rate_pairs as (
      select c.id, s.scope, s.name, s.key, s.max_starts, s.period_ms,
        row_number() over (partition by s.scope, s.name, s.key order by c.src, c.priority, c.run_at, c.id) as rank
      from cinfo c cross join lateral (
      select 'queue'::text as scope, l.name, ''::text as key, l.max_starts, l.period_ms from rlim l
        where l.scope = 'queue' and l.name = c.queue
      union all select 'kind', l.name, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'kind' and l.name = c.kind
      union all select 'key', l.name, c.ck, l.max_starts, l.period_ms from rlim l
        where l.scope = 'key' and l.name = c.queue and c.ck is not null
      union all (select 'destination', c.dest, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'destination' and c.dest is not null and l.name in (c.dest, '*')
        order by l.name = '*' limit 1)
    ) s
    ),
    rate_need as (
      select scope, name, key, max(max_starts) as max_starts, max(period_ms) as period_ms, count(*)::int as demand
      from rate_pairs group by scope, name, key
    ),
    rate_rooms as (
      select * from "skiplock".rate_room((select coalesce(array_agg(scope), '{}'::text[]) from rate_need), (select coalesce(array_agg(name), '{}'::text[]) from rate_need),
        (select coalesce(array_agg(key), '{}'::text[]) from rate_need), (select coalesce(array_agg(max_starts), '{}'::int[]) from rate_need), (select coalesce(array_agg(period_ms), '{}'::int[]) from rate_need), (select coalesce(array_agg(demand), '{}'::int[]) from rate_need),
        (select now from clock))
      where (select count(*) from room) >= 0
    ),
    rate_blocked as (
      select p.id from rate_pairs p
      left join rate_rooms r on r.rate_scope = p.scope and r.rate_name = p.name and r.rate_key = p.key
      where p.rank > coalesce(r.room, 0)
    ),
    within as (
      select r.id from (
        select c.*,
          count(*) filter (where c.src > 0) over (partition by c.queue order by c.src, c.priority, c.run_at, c.id rows between unbounded preceding and current row) as in_queue,
          count(*) filter (where c.src > 0) over (partition by c.kind order by c.src, c.priority, c.run_at, c.id rows between unbounded preceding and current row) as in_kind,
          count(*) filter (where c.src > 0) over (partition by c.queue, c.ck order by c.src, c.priority, c.run_at, c.id rows between unbounded preceding and current row) as in_key
        from cinfo c
      ) r
      left join scope_room q on q.limit_scope = 'queue' and q.limit_name = r.queue
      left join scope_room k on k.limit_scope = 'kind' and k.limit_name = r.kind
      where (r.src = 0 or (r.in_queue <= coalesce(q.room, r.in_queue) and r.in_kind <= coalesce(k.room, r.in_kind)
        and (r.ck is null
          or r.in_key <= coalesce(((select m from key_room) ->> (r.queue || chr(31) || r.ck))::int, r.in_key))))
        and r.id not in (select b.id from rate_blocked b)
        and (r.dest is null or r.dest <> all(coalesce((select h.probing from held h), '{}'::text[]))
          or r.id in (select p.id from probe_pick p))
      order by r.src, r.priority, r.run_at, r.id
      limit $51
    ),
    probe_won as (
      select * from "skiplock".claim_probes(
        (select coalesce(array_agg(p.dest), '{}') from probe_pick p where p.id in (select id from within)),
        (select coalesce(array_agg(p.id), '{}') from probe_pick p where p.id in (select id from within)),
        (select coalesce(array_agg(($52::int[])[array_position($53::text[], p.kind)]), '{}') from probe_pick p where p.id in (select id from within)),
        (select now from clock))
    ),
    claimed as (
      update "skiplock".jobs j set
        state = 'running',
        attempt = j.attempt + 1,
        lease_token = $54::uuid,
        lease_expires_at = (select now from clock) + ($55::int[])[array_position($56::text[], j.kind)]
          * interval '1 millisecond',
        locked_by = $57,
        started_at = coalesce(j.started_at, (select now from clock)),
        attempted_at = (select now from clock),
        updated_at = (select now from clock),
        last_error = case when j.state = 'running' then jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock)) else j.last_error end,
        errors = case when j.state = 'running' then jsonb_path_query_array(j.errors || jsonb_build_array(jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock))), '$[last-9 to last]') else j.errors end
      where j.id = any(array(select c.id from within c
          where c.id not in (select p.id from probe_pick p) or c.id in (select w.job_id from probe_won w)))
      returning j.id, j.kind, j.queue, j.payload, j.priority, j.attempt, j.max_attempts, j.correlation_id, j.run_at,
        j.ordering_key, j.destination, j.concurrency_key, j.progress, j.trace_context
    ),
    rate_taken as (
      select "skiplock".record_rate_starts(
        coalesce(array_agg(t.scope), '{}'), coalesce(array_agg(t.name), '{}'), coalesce(array_agg(t.key), '{}'),
        coalesce(array_agg(t.n), '{}'), coalesce(array_agg(t.period_ms), '{}'), (select now from clock)) as written
      from (
        select s.scope, s.name, s.key, count(*)::int as n, max(s.period_ms) as period_ms
        from claimed c cross join lateral (
      select 'queue'::text as scope, l.name, ''::text as key, l.max_starts, l.period_ms from rlim l
        where l.scope = 'queue' and l.name = c.queue
      union all select 'kind', l.name, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'kind' and l.name = c.kind
      union all select 'key', l.name, c.concurrency_key, l.max_starts, l.period_ms from rlim l
        where l.scope = 'key' and l.name = c.queue and c.concurrency_key is not null
      union all (select 'destination', c.destination, '', l.max_starts, l.period_ms from rlim l
        where l.scope = 'destination' and c.destination is not null and l.name in (c.destination, '*')
        order by l.name = '*' limit 1)
    ) s
        group by s.scope, s.name, s.key
      ) t
    )
    select
      (select json_build_array(string_agg(c.id::text, ','), json_agg(c.payload),
          ('[' || string_agg(concat_ws(',', c.priority, c.attempt, c.max_attempts), ',') || ']')::json,
          min(c.kind), case when min(c.kind) <> max(c.kind) then json_agg(c.kind) end,
          min(c.queue), case when min(c.queue) <> max(c.queue) then json_agg(c.queue) end,
          json_agg(json_build_array(c.id::text, c.correlation_id, c.ordering_key, c.destination, c.progress,
            c.trace_context)) filter (where num_nonnulls(c.correlation_id, c.ordering_key, c.destination,
            c.progress, c.trace_context) > 0))
        from (select * from claimed order by priority, run_at, id) c having count(*) > 0) as jobs,
      (select json_agg(json_build_array(s.row_kind, s.id, s.state, s.dead_reason, s.run_at_ms, s.parent))
    from (select 'settled' as row_kind, s.id::text as id, s.state, s.dead_reason,
        (extract(epoch from s.run_at) * 1000)::float8 as run_at_ms, s.parent
      from settled s where s.state <> 'completed'
      union all
      select 'lost', i.id::text, null, null, null::float8, null
      from settle_input i where i.id not in (select id from settled)) s) as report,
      (select f.needed from shape f) as limited,
      (select f.ordered from shape f) as ordered,
      exists (select 1 from settled s where s.parent) as ended_parents,
      (select f.rated from shape f) as rated,
      null::json as moves,
      (select json_agg(json_build_array(w.destination, w.job_id::text)) from probe_won w) as probes,
      n.at_ms as next_start_ms,
      n.at_ms - (extract(epoch from (select now from clock)) * 1000)::float8 as next_start_in_ms
    from (select (select (extract(epoch from least(
      (select min(r.next_at) from rate_rooms r), (select h.rate_next_at from held h),
      (select min(k.next_at) from key_rate k where k.room = 0))) * 1000)::float8
    where (select written from rate_taken) >= 0) as at_ms) n
