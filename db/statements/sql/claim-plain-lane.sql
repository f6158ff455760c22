-- claim shape "plain-lane": more than a few invocations of the worker: claims from its lane first
with recursive clock as (select clock_timestamp() as now),


    shape as (select g.needed as needed, g.rated, g.ordered from "skiplock".claim_guard($1::text[], null::text[], (select now from clock), true) g),

    in_lane as (
      select j.id from "skiplock".jobs j
      where ((j.id / 64) % 16) = $2::bigint and j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($3::text[])
    and (j.queue || '') <> all((select "skiplock".paused_names($4::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($5::text))::text[]) and j.ordering_key is null  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled')))))  and j.concurrency_key is null and (select count(*) from "skiplock".invocations i
          where i.worker = $6 and i.expires_at > (select now from clock)) > $7
      order by ((j.id / 64) % 16), j.priority, j.run_at, j.id
      limit $8
      for update skip locked
    ),
    ready as (
      select j.id from "skiplock".jobs j
      where j.state = 'queued' and j.run_at <= (select now from clock) and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($9::text[])
    and (j.queue || '') <> all((select "skiplock".paused_names($10::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($11::text))::text[]) and j.ordering_key is null  and (j.after is null or not exists (
    select 1 from "skiplock".jobs p where p.id = any(j.after)
      and not (p.state = 'completed' or (j.on_parent_failure = 'run' and p.state in ('dead', 'cancelled')))))  and j.concurrency_key is null and j.id not in (select id from in_lane)
      order by j.priority, j.run_at, j.id
      limit $12
      for update skip locked
    ),
    expired as (
      select j.id from "skiplock".jobs j
      where j.id = any(array(select "skiplock".lapsed_leases((select now from clock), $13::text[], $14::int)))
        and j.state = 'running' and coalesce(j.lease_expires_at, 'infinity') <= (select now from clock) and j.attempt < j.max_attempts
        and (j.deadline is null or j.deadline > (select now from clock)) and j.kind = any($15::text[])  and (j.queue || '') <> all((select "skiplock".paused_names($16::text))::text[]) and (j.kind || '') <> all((select "skiplock".paused_names($17::text))::text[]) and j.ordering_key is null

      order by j.lease_expires_at
      limit $18
      for update skip locked
    ),

    claimed as (
      update "skiplock".jobs j set
        state = 'running',
        attempt = j.attempt + 1,
        lease_token = $19::uuid,
        lease_expires_at = (select now from clock) + ($20::int[])[array_position($21::text[], j.kind)]
          * interval '1 millisecond',
        locked_by = $22,
        started_at = coalesce(j.started_at, (select now from clock)),
        attempted_at = (select now from clock),
        updated_at = (select now from clock),
        last_error = case when j.state = 'running' then jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock)) else j.last_error end,
        errors = case when j.state = 'running' then jsonb_path_query_array(j.errors || jsonb_build_array(jsonb_build_object('class', 'lease_expired',
    'message', 'the lease expired before its holder finished (the invocation died or overran)',
    'attempt', j.attempt, 'holder', j.locked_by, 'at', (select now from clock))), '$[last-9 to last]') else j.errors end
      where j.id = any(array(select id from expired union all select id from in_lane union all select id from ready limit $23))
        and not (select f.needed from shape f) and not (select f.ordered from shape f)
      returning j.id, j.kind, j.queue, j.payload, j.priority, j.attempt, j.max_attempts, j.correlation_id, j.run_at,
        j.ordering_key, j.destination, j.concurrency_key, j.progress, j.trace_context
    )
    select
      (select json_agg(case when num_nonnulls(c.correlation_id, c.ordering_key, c.destination, c.progress,
            c.trace_context) = 0 then json_build_array(c.id::text, c.kind, c.queue, c.payload, c.priority, c.attempt, c.max_attempts)
          else json_build_array(c.id::text, c.kind, c.queue, c.payload, c.priority, c.attempt,
            c.max_attempts, c.correlation_id, c.ordering_key, c.destination, c.progress, c.trace_context) end
          order by c.priority, c.run_at, c.id)
        from claimed c) as jobs,
      null::json as report,
      (select f.needed from shape f) as limited,
      (select f.ordered from shape f) as ordered,
      false as ended_parents,
      (select f.rated from shape f) as rated,
      null::json as moves,
      null::json as probes,
      null::float8 as next_start_ms,
      null::float8 as next_start_in_ms
