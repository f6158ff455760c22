-- Custom SQL migration: the stats also count completed jobs that were deleted as they
-- completed (skiplock.completed_counts). Always write the schema as "skiplock" (quoted): the
-- migrator substitutes it.
DROP VIEW "skiplock"."queue_stats";
--> statement-breakpoint
CREATE VIEW "skiplock"."queue_stats" AS
WITH live_rows AS (
  -- Two scans, each on its own partial index (an IN over both states would read the table).
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs" WHERE state = 'queued'
  UNION ALL
  SELECT queue, kind, state, run_at, attempt, lease_expires_at FROM "skiplock"."jobs" WHERE state = 'running'
), live AS (
  SELECT queue, kind,
    count(*) FILTER (WHERE state = 'queued' AND run_at <= now()) AS ready,
    count(*) FILTER (WHERE state = 'queued' AND run_at > now() AND attempt = 0) AS scheduled,
    count(*) FILTER (WHERE state = 'queued' AND run_at > now() AND attempt > 0) AS retry_waiting,
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
--> statement-breakpoint
-- Throughput and error rate over a window, now also counting completed jobs that were deleted
-- as they completed (to the minute).
CREATE OR REPLACE FUNCTION "skiplock".queue_activity(window_seconds integer DEFAULT 300)
RETURNS TABLE (queue text, kind text, completed bigint, dead bigint, cancelled bigint,
  throughput_per_second float8, error_rate float8)
LANGUAGE sql STABLE AS $$
  WITH finished AS (
    SELECT j.queue, j.kind,
      count(*) FILTER (WHERE j.state = 'completed') AS completed,
      count(*) FILTER (WHERE j.state = 'dead') AS dead,
      count(*) FILTER (WHERE j.state = 'cancelled') AS cancelled
    FROM "skiplock"."jobs" j
    WHERE j.state IN ('completed', 'dead', 'cancelled') AND j.finished_at IS NOT NULL
      AND j.finished_at >= now() - make_interval(secs => window_seconds)
    GROUP BY j.queue, j.kind
    UNION ALL
    SELECT c.queue, c.kind, sum(c.completed)::bigint, 0, 0
    FROM "skiplock"."completed_counts" c
    WHERE c.minute >= date_trunc('minute', now() - make_interval(secs => window_seconds))
    GROUP BY c.queue, c.kind
  ), totals AS (
    SELECT f.queue, f.kind, sum(f.completed)::bigint AS completed, sum(f.dead)::bigint AS dead,
      sum(f.cancelled)::bigint AS cancelled
    FROM finished f
    GROUP BY f.queue, f.kind
  )
  SELECT t.queue, t.kind, t.completed, t.dead, t.cancelled,
    t.completed::float8 / greatest(window_seconds, 1),
    t.dead::float8 / nullif(t.completed + t.dead, 0)
  FROM totals t
$$;
