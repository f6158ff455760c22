ALTER TABLE "skiplock"."jobs" ADD COLUMN "result" jsonb;--> statement-breakpoint
-- Results: what a handler returned, written with its completion. job_status shows it, and the
-- destination (added in 0014); OR REPLACE keeps the view's grants (new columns go last). Always write
-- the schema as "skiplock" (quoted): the migrator substitutes it.
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
  j.ordering_key, j.concurrency_key, j.destination, j.result
FROM "skiplock"."jobs" j;
