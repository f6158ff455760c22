-- Custom SQL migration: jobs of an ordering key that wait for the job before them (parked:
-- queued with run_at = infinity) are counted as waiting, not as scheduled, in the stats (the
-- job_status view still calls them scheduled: replacing it would drop its grants). Always write the
-- schema as "skiplock" (quoted): the migrator substitutes it.
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
