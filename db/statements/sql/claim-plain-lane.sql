-- claim shape "plain-lane": more than a few invocations of the worker: claims from its lane first
with recursive clock as (select clock_timestamp() as now),

    settle_input as (select r.id, ($1::uuid[])[r.t] as token
    from unnest(string_to_array($2, ',')::bigint[], string_to_array($3, ',')::int[]) as r(id, t)), settled as (update "skiplock".jobs j set
        lease_token = r.token,
        state = 'completed',
        finished_at = (select now from clock),
        lease_expires_at = null,

        updated_at = (select now from clock)
      from settle_input r
      where j.id = r.id and j.id = any(array(select id from settle_input)) and j.lease_token = r.token and (case when j.state = 'running' then true end)
      returning j.id, j.state, j.dead_reason, j.run_at, j.dependents is not null as parent),
      settle_done as (select (select count(*) from settled) as n),
    shape as (select g.needed as needed, g.rated, g.ordered from "skiplock".claim_guard($4::text[], null::text[], (select now from clock), true) g),

    in_lane as (
      select j.id from "skiplock".jobs j
      where ((j.id / 64) % 16) = $5::bigint and j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($6::text[])
    and (j.queue || '') <> all((select "skiplock".paused_names($7::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($8::text))::text[]) and j.ordering_key is null  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled'))))) and (select n from settle_done) >= 0 and j.concurrency_key is null and (select count(*) from "skiplock".invocations i
          where i.worker = $9 and i.expires_at > (select now from clock)) > $10
      order by ((j.id / 64) % 16), j.priority, j.run_at, j.id
      limit $11
      for update skip locked
    ),
    ready as (
      select j.id from "skiplock".jobs j
      where j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($12::text[])
    and (j.queue || '') <> all((select "skiplock".paused_names($13::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($14::text))::text[]) and j.ordering_key is null  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled'))))) and (select n from settle_done) >= 0 and j.concurrency_key is null and j.id not in (select id from in_lane)
      order by j.priority, j.run_at, j.id
      limit $15
      for update skip locked
    ),
    expired as (
      select j.id from "skiplock".jobs j
      where j.id = any(array(select "skiplock".lapsed_leases((select now from clock), $16::text[], $17::int)))
        and j.state = 'running' and coalesce(j.lease_expires_at, 'infinity') <= (select now from clock) and j.attempt < j.max_attempts
        and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($18::text[])  and (j.queue || '') <> all((select "skiplock".paused_names($19::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($20::text))::text[]) and j.ordering_key is null  and j.id not in (select id from settle_input) and (select n from settle_done) >= 0

      order by j.lease_expires_at
      limit $21
      for update skip locked
    ),

    claimed as (
      update "skiplock".jobs j set
        state = 'running',
        attempt = j.attempt + 1,
        lease_token = $22::uuid,
        lease_expires_at = (select now from clock) + ($23::int[])[array_position($24::text[], j.kind)]
          * interval '1 millisecond',
        locked_by = $25,
        started_at = coalesce(j.started_at, (select now from clock)),
        attempted_at = (select now from clock),
        updated_at = (select now from clock),
        last_error = case when j.state = 'running' then jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock)) else j.last_error end,
        errors = case when j.state = 'running' then jsonb_path_query_array(j.errors || jsonb_build_array(jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock))), '$[last-9 to last]') else j.errors end
      where j.id = any(array(select id from expired union all select id from in_lane union all select id from ready limit $26))
        and not (select f.needed from shape f) and not (select f.ordered from shape f)
      returning j.id, j.kind, j.queue, j.payload, j.priority, j.attempt, j.max_attempts, j.correlation_id, j.run_at,
        j.ordering_key, j.destination, j.concurrency_key, j.progress, j.trace_context
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
      null::json as probes,
      null::float8 as next_start_ms,
      null::float8 as next_start_in_ms
