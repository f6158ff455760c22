-- Custom SQL migration: the claim's concurrency-limit check, and the views that read queued jobs
-- (jobs with a concurrency key left the claim index). Always write the schema as "skiplock"
-- (quoted): the migrator substitutes it, also inside strings and function bodies.

-- How many more jobs each limited scope may start, counted race-free for every invocation. A claim
-- calls it once, after locking its candidate rows. For each scope, in one global order (no two
-- claims can wait on each other), it takes a transaction-scoped advisory lock, held until the claim
-- commits, and only then counts the running jobs: a VOLATILE function takes a fresh snapshot for
-- each statement in it, so the count sees every claim that held the lock before and committed,
-- and the statement's own settled outcomes (written before the call). The claim's snapshot alone
-- could not: two claims that start together would both see room for the same job.
-- scope: 'queue' (name = queue), 'kind' (name = kind), 'key' (name = queue, key = concurrency key).
CREATE FUNCTION "skiplock".claim_room(scopes text[], names text[], keys text[], maxes integer[])
RETURNS TABLE (limit_scope text, limit_name text, limit_key text, room integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s record;
  n integer;
BEGIN
  FOR s IN
    SELECT u.scope, u.name, u.key, u.max_running,
      hashtextextended('"skiplock"' || chr(31) || u.scope || chr(31) || u.name || chr(31) || coalesce(u.key, ''), 0)
        AS lock_key
    FROM unnest(scopes, names, keys, maxes) AS u(scope, name, key, max_running)
    ORDER BY lock_key
  LOOP
    PERFORM pg_advisory_xact_lock(s.lock_key);
    IF s.scope = 'queue' THEN
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j WHERE j.state = 'running' AND j.queue = s.name LIMIT s.max_running) x;
    ELSIF s.scope = 'kind' THEN
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j WHERE j.state = 'running' AND j.kind = s.name LIMIT s.max_running) x;
    ELSE
      SELECT count(*) INTO n FROM (
        SELECT 1 FROM "skiplock".jobs j
        WHERE j.state = 'running' AND j.queue = s.name AND j.concurrency_key = s.key LIMIT s.max_running) x;
    END IF;
    limit_scope := s.scope;
    limit_name := s.name;
    limit_key := s.key;
    room := greatest(s.max_running - n, 0);
    RETURN NEXT;
  END LOOP;
END
$$;
--> statement-breakpoint
-- Parked jobs of an ordering key are `waiting`, not `scheduled`; the keys are shown. OR REPLACE keeps
-- the view's grants (new columns go last).
CREATE OR REPLACE VIEW "skiplock"."job_status" AS
SELECT
  j.id, j.kind, j.created_at, j.correlation_id, j.dedupe_key, j.dedupe_mode, j.dedupe_window, j.queue,
  j.priority, j.max_attempts, j.deadline, j.payload, j.run_at, j.started_at, j.state, j.attempt,
  j.lease_token, j.lease_expires_at, j.locked_by, j.attempted_at, j.finished_at, j.updated_at,
  j.dead_reason, j.progress, j.last_error, j.errors, j.replay_count, j.replayed_at, j.replayed_by,
  CASE
    WHEN j.state = 'queued' AND j.run_at = 'infinity' THEN 'waiting'
    WHEN j.state = 'queued' AND j.run_at > clock_timestamp() AND j.attempt > 0 THEN 'retry_waiting'
    WHEN j.state = 'queued' AND j.run_at > clock_timestamp() THEN 'scheduled'
    WHEN j.state = 'queued' THEN 'ready'
    WHEN j.state = 'running' AND j.lease_expires_at <= clock_timestamp() THEN 'lease_expired'
    ELSE j.state
  END AS status,
  j.ordering_key, j.concurrency_key
FROM "skiplock"."jobs" j;
--> statement-breakpoint
CREATE OR REPLACE VIEW "skiplock"."queue_stats" AS
WITH live_rows AS (
  -- Three scans, each on its own partial index (an IN over both states would read the table):
  -- queued jobs without and with a concurrency key, and running jobs.
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs"
  WHERE state = 'queued' AND concurrency_key IS NULL
  UNION ALL
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs"
  WHERE state = 'queued' AND concurrency_key IS NOT NULL
  UNION ALL
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs" WHERE state = 'running'
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
