-- Claims over many keys. claim_room skips a concurrency key whose lock another claim holds (a
-- per-key limit over 1,000 keys: claims waited on each other in claim_room, 236 ms of a 378 ms
-- claim). And two index changes for ordering keys (a claim of 500 over 1,000 keys took 75 ms):
-- jobs_ordering_blockers_idx holds only the jobs that hold their key, so "is anything ahead of
-- this job?" no longer walks the key's parked followers; and jobs_lease_idx now also requires
-- lease_expires_at is not null (always true of a running row), so the other indexes of running
-- rows (ordering key, concurrency key) no longer tie with it in the planner's costs when the
-- statistics saw no running row (it then walked every running row per candidate). The two
-- statements that count all running rows of a scope say so too, or they would read the table.
-- Always write the schema as "skiplock" (quoted): the migrator substitutes it, also inside strings
-- and function bodies.
DROP INDEX "skiplock"."jobs_lease_idx";--> statement-breakpoint
CREATE INDEX "jobs_ordering_blockers_idx" ON "skiplock"."jobs" USING btree ("ordering_key","id") WHERE ordering_key is not null and ((finished_at is null and run_at <> 'infinity') or (dead_reason is not null and ordering_hold));--> statement-breakpoint
CREATE INDEX "jobs_lease_idx" ON "skiplock"."jobs" USING btree ("lease_expires_at") WHERE state = 'running' and lease_expires_at is not null;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "skiplock".claim_room(scopes text[], names text[], keys text[], maxes integer[])
RETURNS TABLE (limit_scope text, limit_name text, limit_key text, room integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s record;
  n integer;
  got_room boolean := false;
BEGIN
  FOR s IN
    SELECT u.scope, u.name, u.key, u.max_running,
      hashtextextended('"skiplock"' || chr(31) || u.scope || chr(31) || u.name || chr(31) || coalesce(u.key, ''), 0)
        AS lock_key
    FROM unnest(scopes, names, keys, maxes) AS u(scope, name, key, max_running)
    ORDER BY lock_key
  LOOP
    -- Once this claim has room under one key, a key another claim holds right now gets no room in
    -- this one (the next claim takes it): two claims over the same thousand keys would otherwise wait
    -- on each other key by key, and claims ran one at a time. Until then it waits, so a claim never
    -- comes back empty only because others held its keys. Waits stay in the global order (a claim
    -- waits only for a lock ordered after every one it holds), so no two claims wait on each other.
    -- A queue or kind is one lock: a claim waits for it.
    IF s.scope = 'key' AND got_room AND NOT pg_try_advisory_xact_lock(s.lock_key) THEN
      limit_scope := s.scope;
      limit_name := s.name;
      limit_key := s.key;
      room := 0;
      RETURN NEXT;
      CONTINUE;
    END IF;
    PERFORM pg_advisory_xact_lock(s.lock_key);
    IF s.scope = 'queue' THEN
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j WHERE j.state = 'running' AND j.lease_expires_at IS NOT NULL AND j.queue = s.name LIMIT s.max_running) x;
    ELSIF s.scope = 'kind' THEN
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j WHERE j.state = 'running' AND j.lease_expires_at IS NOT NULL AND j.kind = s.name LIMIT s.max_running) x;
    ELSE
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j
        WHERE j.state = 'running' AND j.queue = s.name AND j.concurrency_key = s.key LIMIT s.max_running) x;
    END IF;
    limit_scope := s.scope;
    limit_name := s.name;
    limit_key := s.key;
    room := greatest(s.max_running - n, 0);
    got_room := got_room OR (s.scope = 'key' AND room > 0);
    RETURN NEXT;
  END LOOP;
END
$$;
--> statement-breakpoint
CREATE OR REPLACE VIEW "skiplock"."queue_stats" AS
WITH live_rows AS (
  -- Three scans, each on its own partial index (an IN over both states would read the table):
  -- queued jobs without and with a concurrency key, and running jobs (jobs_lease_idx, whose
  -- predicate now also says lease_expires_at is not null).
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs"
  WHERE state = 'queued' AND concurrency_key IS NULL
  UNION ALL
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs"
  WHERE state = 'queued' AND concurrency_key IS NOT NULL
  UNION ALL
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs"
  WHERE state = 'running' AND lease_expires_at IS NOT NULL
), live AS (
  SELECT queue, kind,
    count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) AS ready,
    count(*) FILTER (WHERE state = 'queued' AND run_at > now() AND run_at <> 'infinity' AND attempt = 0) AS scheduled,
    count(*) FILTER (WHERE state = 'queued' AND run_at > now() AND run_at <> 'infinity' AND attempt > 0) AS retry_waiting,
    count(*) FILTER (WHERE state = 'queued' AND run_at = 'infinity') AS waiting,
    count(*) FILTER (WHERE state = 'running') AS running,
    count(*) FILTER (WHERE state = 'running' AND lease_expires_at <= now()) AS lease_expired,
    extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'queued' AND run_at <= now()))::float8
      AS oldest_ready_age_seconds
  FROM live_rows
  GROUP BY queue, kind
), dlq AS (
  SELECT queue, kind, count(*) AS dead
  FROM "skiplock"."jobs"
  WHERE state = 'dead' AND finished_at IS NOT NULL
  GROUP BY queue, kind
), recent AS (
  -- Finished rows of the last hour, plus the per-minute counts of completed jobs that were
  -- deleted as they completed (completedJobs: 'delete'), to the minute.
  SELECT queue, kind, sum(completed_1h)::bigint AS completed_1h, sum(dead_1h)::bigint AS dead_1h,
    sum(cancelled_1h)::bigint AS cancelled_1h
  FROM (
    SELECT queue, kind,
      count(*) FILTER (WHERE state = 'completed') AS completed_1h,
      count(*) FILTER (WHERE state = 'dead') AS dead_1h,
      count(*) FILTER (WHERE state = 'cancelled') AS cancelled_1h
    FROM "skiplock"."jobs"
    WHERE state IN ('completed', 'dead', 'cancelled') AND finished_at IS NOT NULL
      AND finished_at >= now() - interval '1 hour'  -- now(), not clock_timestamp(): an index condition must be stable
    GROUP BY queue, kind
    UNION ALL
    SELECT queue, kind, sum(completed)::bigint, 0, 0
    FROM "skiplock"."completed_counts"
    WHERE minute >= date_trunc('minute', now() - interval '1 hour')
    GROUP BY queue, kind
  ) finished
  GROUP BY queue, kind
)
SELECT
  coalesce(live.queue, dlq.queue, recent.queue) AS queue,
  coalesce(live.kind, dlq.kind, recent.kind) AS kind,
  coalesce(live.ready, 0) AS ready,
  coalesce(live.scheduled, 0) AS scheduled,
  coalesce(live.retry_waiting, 0) AS retry_waiting,
  coalesce(live.waiting, 0) AS waiting,
  coalesce(live.running, 0) AS running,
  coalesce(live.lease_expired, 0) AS lease_expired,
  coalesce(dlq.dead, 0) AS dead,
  coalesce(recent.completed_1h, 0) AS completed_1h,
  coalesce(recent.dead_1h, 0) AS dead_1h,
  coalesce(recent.cancelled_1h, 0) AS cancelled_1h,
  live.oldest_ready_age_seconds
FROM live
FULL JOIN dlq ON dlq.queue = live.queue AND dlq.kind = live.kind
FULL JOIN recent ON recent.queue = coalesce(live.queue, dlq.queue) AND recent.kind = coalesce(live.kind, dlq.kind);
