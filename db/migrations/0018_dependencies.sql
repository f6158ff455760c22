ALTER TABLE "skiplock"."jobs" DROP CONSTRAINT "jobs_dead_reason_check";--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "after" bigint[];--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "on_parent_failure" text;--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "dependents" bigint[];--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "jobs_after_check" CHECK (("skiplock"."jobs"."after" is null) = ("skiplock"."jobs"."on_parent_failure" is null)
          and ("skiplock"."jobs"."on_parent_failure" is null or "skiplock"."jobs"."on_parent_failure" in ('cancel', 'run')));--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD CONSTRAINT "jobs_dead_reason_check" CHECK (case "skiplock"."jobs"."state" when 'dead' then "skiplock"."jobs"."dead_reason" is not null
          when 'cancelled' then true else "skiplock"."jobs"."dead_reason" is null end);--> statement-breakpoint
-- Dependencies between jobs. Always write the schema as "skiplock" (quoted): the migrator
-- substitutes it, also inside function bodies.
--
-- A child (enqueued with `after`) waits parked — queued, run_at = infinity, passed over by every
-- claim index — until each of its parents completed. Its enqueue appends the child's id to each
-- existing parent's `dependents` under the parent's row lock, so a parent that ends after it is seen
-- ending with its children listed (a settle that waited for that lock re-reads the row), and one
-- that ended before it is seen ended by the enqueue. When a parent with dependents changes state,
-- this trigger moves its children:
-- - completed (or dead/cancelled, for children in 'run' mode): a waiting child whose other parents
--   are done is released (run_at = now).
-- - dead or cancelled: its waiting children in 'cancel' mode are cancelled as dependency_failed,
--   and their own children follow (this trigger fires for them in turn).
-- - back to queued from dead (a replay): the children it had cancelled wait again, parked, unless
--   another of their parents is still dead or cancelled; theirs follow in turn.
-- It runs as the caller (worker, admin), after the statement, with a snapshot of its own per query.
--
-- Two parents of one child ending at once, in two transactions, would each see the other still
-- running and neither would release the child. So an ending parent first takes an advisory lock on
-- its id (held until it commits), and a parent that is not done in the checker's snapshot but whose
-- lock is held counts as done: it is ending right now. Of two such transactions, the one that checks
-- last sees the other's lock or its commit, so one of them releases the child. The claim, which takes
-- a child only when its own snapshot sees every parent done, has the last word: at worst a child is
-- released a moment early and waits ready until its last parent commits. Only one transaction
-- releases a given child (another advisory lock, tried, never waited for): two that both did, over
-- several children in different orders, could deadlock on their row locks.
CREATE FUNCTION "skiplock".jobs_dependents() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  now_ts timestamptz := clock_timestamp();
  ending integer := hashtext('"skiplock".jobs_dependents.ending');
  releasing integer := hashtext('"skiplock".jobs_dependents.releasing');
  child record;
  open_parent bigint;
  done boolean;
BEGIN
  IF NEW.state = 'queued' THEN
    UPDATE "skiplock".jobs c SET state = 'queued', dead_reason = NULL, finished_at = NULL,
      run_at = 'infinity', updated_at = now_ts
    WHERE c.id = ANY (NEW.dependents) AND c.state = 'cancelled' AND c.dead_reason = 'dependency_failed'
      AND NEW.id = ANY (c.after)
      AND NOT EXISTS (
        SELECT 1 FROM "skiplock".jobs p
        WHERE p.id = ANY (c.after) AND p.id <> NEW.id AND p.state IN ('dead', 'cancelled'));
    RETURN NULL;
  END IF;
  PERFORM pg_advisory_xact_lock(ending, (NEW.id & 2147483647)::integer);
  IF NEW.state IN ('dead', 'cancelled') THEN
    UPDATE "skiplock".jobs c SET state = 'cancelled', dead_reason = 'dependency_failed', finished_at = now_ts,
      lease_expires_at = NULL, updated_at = now_ts
    WHERE c.id = ANY (NEW.dependents) AND c.state = 'queued' AND c.on_parent_failure = 'cancel'
      AND NEW.id = ANY (c.after);
  END IF;
  FOR child IN
    SELECT c.id, c.after, c.on_parent_failure FROM "skiplock".jobs c
    WHERE c.id = ANY (NEW.dependents) AND c.state = 'queued' AND c.run_at = 'infinity' AND NEW.id = ANY (c.after)
    ORDER BY c.id
  LOOP
    done := true;
    FOR open_parent IN
      SELECT p.id FROM "skiplock".jobs p
      WHERE p.id = ANY (child.after) AND p.id <> NEW.id
        AND NOT (p.state = 'completed' OR (child.on_parent_failure = 'run' AND p.state IN ('dead', 'cancelled')))
    LOOP
      -- Not done, and no one is ending it right now: the child waits for it.
      IF pg_try_advisory_lock_shared(ending, (open_parent & 2147483647)::integer) THEN
        PERFORM pg_advisory_unlock_shared(ending, (open_parent & 2147483647)::integer);
        done := false;
        EXIT;
      END IF;
    END LOOP;
    IF done AND pg_try_advisory_xact_lock(releasing, (child.id & 2147483647)::integer) THEN
      UPDATE "skiplock".jobs c SET run_at = now_ts, updated_at = now_ts
      WHERE c.id = child.id AND c.state = 'queued' AND c.run_at = 'infinity';
    END IF;
  END LOOP;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
-- Only a parent's own state changes call it: its end, and its way back from dead or cancelled.
CREATE TRIGGER jobs_dependents AFTER UPDATE OF state ON "skiplock".jobs
FOR EACH ROW
WHEN (NEW.dependents IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
  AND (NEW.state IN ('completed', 'dead', 'cancelled') OR OLD.state IN ('dead', 'cancelled')))
EXECUTE FUNCTION "skiplock".jobs_dependents();
--> statement-breakpoint
-- job_status shows a job's parents, its children and what a parent's failure does to it.
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
  j.ordering_key, j.concurrency_key, j.destination, j.result, j.after, j.dependents, j.on_parent_failure
FROM "skiplock"."jobs" j;
