-- Fan-in: two parents of one child ending side by side could both leave it waiting. The second
-- ender read the first parent's state with a snapshot taken before the first one committed, then
-- found its advisory lock already free (released at that commit) and took the parent for open; the
-- first, earlier, had found the second's lock not yet taken. Seen once in CI (a child stranded in
-- test/db/dependencies.test.ts), reproduced at about 1 in 150 runs of that scenario. The check now
-- reads the parent again after seeing its lock free.
CREATE OR REPLACE FUNCTION "skiplock".jobs_dependents() RETURNS trigger
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
      -- Not done when this loop's snapshot was taken, and no one is ending it now. The one who ended it
      -- may have committed in between (a commit is visible before its locks are released): look once
      -- more, with a snapshot taken after the lock was seen free. Still open: the child waits for it.
      IF pg_try_advisory_lock_shared(ending, (open_parent & 2147483647)::integer) THEN
        PERFORM pg_advisory_unlock_shared(ending, (open_parent & 2147483647)::integer);
        IF NOT EXISTS (
          SELECT 1 FROM "skiplock".jobs q
          WHERE q.id = open_parent
            AND (q.state = 'completed' OR (child.on_parent_failure = 'run' AND q.state IN ('dead', 'cancelled')))
        ) THEN
          done := false;
          EXIT;
        END IF;
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
