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
-- its children follow:
-- - completed (or dead/cancelled, for children in 'run' mode): a waiting child whose other parents
--   are done is released (run_at = now).
-- - dead or cancelled: its waiting children in 'cancel' mode are cancelled as dependency_failed,
--   and their own children follow (the same triggers fire for that update in turn).
-- - back to queued from dead (a replay): the children it had cancelled wait again, parked, unless
--   another of their parents is still dead or cancelled; theirs follow in turn.
-- A row trigger only notes the parent's id (in a transaction-local setting: no statement, a few µs);
-- a statement trigger then moves the children of every parent the statement ended, set by set. A
-- statement run per row costs ~100 µs here (the jobs table's indexes are opened each time): per row,
-- a chain of 10,000 completions took 3.5 s; per statement, a few statements per batch. Both run as
-- the caller (worker, admin), after the statement, seeing its changes.
--
-- Two parents of one child ending at the same moment, in two transactions, would each see the
-- other still running and neither would release the child. So an ending parent with such children
-- first takes an advisory lock on its id (held until it commits), and a parent that is not done in
-- the checker's snapshot but whose lock is held counts as done: it is ending right now. Of two such
-- transactions, the one that checks last sees the other's lock or its commit, so one of them
-- releases the child. The claim, which takes a child only when its own snapshot sees every parent
-- done, has the last word: at worst a child is released a moment early and waits ready until its
-- last parent commits. Only one transaction releases a given child (another advisory lock, tried,
-- never waited for): two that both did, over several children in different orders, could deadlock
-- on their row locks.
CREATE FUNCTION "skiplock".jobs_dependents_note() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
  noted text;
BEGIN
  noted := pg_catalog.set_config('skiplock.ended_parents',
    COALESCE(pg_catalog.current_setting('skiplock.ended_parents', true), '') || NEW.id || ',', true);
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE FUNCTION "skiplock".jobs_dependents() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  noted text := current_setting('skiplock.ended_parents', true);
  ended bigint[];
  now_ts timestamptz := clock_timestamp();
  ending integer := hashtext('"skiplock".jobs_dependents.ending');
  releasing integer := hashtext('"skiplock".jobs_dependents.releasing');
  child record;
  open_parent bigint;
  done boolean;
BEGIN
  IF noted IS NULL OR noted = '' THEN
    RETURN NULL;
  END IF;
  PERFORM set_config('skiplock.ended_parents', '', true);
  ended := string_to_array(rtrim(noted, ','), ',')::bigint[];
  -- Replayed parents: the children they cancelled wait again, unless another parent still failed.
  UPDATE "skiplock".jobs c SET state = 'queued', dead_reason = NULL, finished_at = NULL,
    run_at = 'infinity', updated_at = now_ts
  WHERE c.id IN (
      SELECT unnest(p.dependents) FROM "skiplock".jobs p WHERE p.id = ANY (ended) AND p.state = 'queued')
    AND c.state = 'cancelled' AND c.dead_reason = 'dependency_failed'
    AND NOT EXISTS (
      SELECT 1 FROM "skiplock".jobs q WHERE q.id = ANY (c.after) AND q.state IN ('dead', 'cancelled'));
  -- Failed parents: their waiting children in 'cancel' mode are cancelled.
  UPDATE "skiplock".jobs c SET state = 'cancelled', dead_reason = 'dependency_failed', finished_at = now_ts,
    lease_expires_at = NULL, updated_at = now_ts
  WHERE c.id IN (
      SELECT unnest(p.dependents) FROM "skiplock".jobs p
      WHERE p.id = ANY (ended) AND p.state IN ('dead', 'cancelled'))
    AND c.state = 'queued' AND c.on_parent_failure = 'cancel'
    AND EXISTS (
      SELECT 1 FROM "skiplock".jobs q
      WHERE q.id = ANY (c.after) AND q.id = ANY (ended) AND q.state IN ('dead', 'cancelled'));
  -- Children waiting for one parent alone (chains, fan-out): no one else decides for them.
  UPDATE "skiplock".jobs c SET run_at = now_ts, updated_at = now_ts
  FROM "skiplock".jobs p
  WHERE p.id = ANY (ended) AND p.state IN ('completed', 'dead', 'cancelled') AND c.id = ANY (p.dependents)
    AND c.after = ARRAY[p.id] AND c.state = 'queued' AND c.run_at = 'infinity'
    AND (p.state = 'completed' OR c.on_parent_failure = 'run');
  -- Children with other parents (fan-in): the advisory-lock protocol above.
  IF NOT EXISTS (
    SELECT 1 FROM "skiplock".jobs p JOIN "skiplock".jobs c ON c.id = ANY (p.dependents)
    WHERE p.id = ANY (ended) AND p.state IN ('completed', 'dead', 'cancelled')
      AND c.state = 'queued' AND c.run_at = 'infinity' AND cardinality(c.after) > 1
  ) THEN
    RETURN NULL;
  END IF;
  PERFORM pg_advisory_xact_lock(ending, (e & 2147483647)::integer) FROM unnest(ended) AS e ORDER BY e;
  FOR child IN
    SELECT DISTINCT c.id, c.after, c.on_parent_failure FROM "skiplock".jobs p
    JOIN "skiplock".jobs c ON c.id = ANY (p.dependents)
    WHERE p.id = ANY (ended) AND p.state IN ('completed', 'dead', 'cancelled')
      AND c.state = 'queued' AND c.run_at = 'infinity' AND cardinality(c.after) > 1
    ORDER BY c.id
  LOOP
    done := true;
    FOR open_parent IN
      SELECT q.id FROM "skiplock".jobs q
      WHERE q.id = ANY (child.after)
        AND NOT (q.state = 'completed' OR (child.on_parent_failure = 'run' AND q.state IN ('dead', 'cancelled')))
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
-- Only a parent's own state changes are noted: its end, and its way back from dead or cancelled.
CREATE TRIGGER jobs_dependents_note AFTER UPDATE OF state ON "skiplock".jobs
FOR EACH ROW
WHEN (NEW.dependents IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
  AND (NEW.state IN ('completed', 'dead', 'cancelled') OR OLD.state IN ('dead', 'cancelled')))
EXECUTE FUNCTION "skiplock".jobs_dependents_note();
--> statement-breakpoint
-- Not `UPDATE OF state`: in a statement with several UPDATEs of jobs (a settle beside a claim, an
-- ordering key's release beside a cancel) the statement trigger fires once, after the last of them,
-- and with a column list it is dropped when that last one sets no state (seen on PostgreSQL 15).
CREATE TRIGGER jobs_dependents AFTER UPDATE ON "skiplock".jobs
FOR EACH STATEMENT
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
