-- Custom SQL migration: views drizzle-kit cannot express.
-- Always write the schema as "skiplock" (quoted): the migrator substitutes the configured schema.

-- Each job with its operational status; retry-waiting and scheduled are told apart by attempt.
CREATE VIEW "skiplock"."job_status" AS
SELECT
  j.*,
  CASE
    WHEN j.state = 'queued' AND j.run_at > clock_timestamp() AND j.attempt > 0 THEN 'retry_waiting'
    WHEN j.state = 'queued' AND j.run_at > clock_timestamp() THEN 'scheduled'
    WHEN j.state = 'queued' THEN 'ready'
    WHEN j.state = 'running' AND j.lease_expires_at <= clock_timestamp() THEN 'lease_expired'
    ELSE j.state
  END AS status
FROM "skiplock"."jobs" j;
--> statement-breakpoint
-- Depth per queue and kind. It scans the whole table: fine for psql, not for a tight loop.
CREATE VIEW "skiplock"."queue_stats" AS
SELECT
  queue,
  kind,
  count(*) FILTER (WHERE status = 'ready') AS ready,
  count(*) FILTER (WHERE status = 'scheduled') AS scheduled,
  count(*) FILTER (WHERE status = 'retry_waiting') AS retry_waiting,
  count(*) FILTER (WHERE state = 'running') AS running,
  count(*) FILTER (WHERE status = 'lease_expired') AS lease_expired,
  count(*) FILTER (WHERE state = 'completed') AS completed,
  count(*) FILTER (WHERE state = 'dead') AS dead,
  count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
  extract(epoch FROM clock_timestamp() - min(run_at) FILTER (WHERE status = 'ready'))::float8 AS oldest_ready_age_seconds
FROM "skiplock"."job_status"
GROUP BY queue, kind;
--> statement-breakpoint
-- Room on every page for the new row versions of claims and outcomes: an UPDATE that stays
-- on its page logs only the changed bytes (and lets pruning reclaim space without vacuum).
ALTER TABLE "skiplock"."jobs" SET (fillfactor = 70);
