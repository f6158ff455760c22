CREATE TABLE "skiplock"."destinations" (
	"name" text PRIMARY KEY NOT NULL,
	"state" text DEFAULT 'closed' NOT NULL,
	"window_start" timestamp with time zone,
	"window_ms" integer DEFAULT 60000 NOT NULL,
	"window_calls" integer DEFAULT 0 NOT NULL,
	"window_failures" integer DEFAULT 0 NOT NULL,
	"prev_calls" integer DEFAULT 0 NOT NULL,
	"prev_failures" integer DEFAULT 0 NOT NULL,
	"trips" integer DEFAULT 0 NOT NULL,
	"opened_at" timestamp with time zone,
	"open_until" timestamp with time zone,
	"probe_job" bigint,
	"probe_until" timestamp with time zone,
	"deferred_until" timestamp with time zone,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"changed_by" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "destinations_state_check" CHECK ("skiplock"."destinations"."state" in ('closed', 'open', 'half_open')),
	CONSTRAINT "destinations_open_check" CHECK ("skiplock"."destinations"."state" <> 'open' or "skiplock"."destinations"."open_until" is not null),
	CONSTRAINT "destinations_half_open_check" CHECK ("skiplock"."destinations"."state" <> 'half_open' or ("skiplock"."destinations"."probe_job" is not null and "skiplock"."destinations"."probe_until" is not null))
);
--> statement-breakpoint
ALTER TABLE "skiplock"."jobs" ADD COLUMN "destination" text;--> statement-breakpoint
CREATE INDEX "destinations_attention_idx" ON "skiplock"."destinations" USING btree ("name") WHERE state <> 'closed' or deferred_until is not null;
--> statement-breakpoint
-- Destination health (circuit breakers and Retry-After deferrals). Always write the schema as
-- "skiplock" (quoted): the migrator substitutes it, also inside strings and function bodies.

-- Writes what a batch of attempts did to their destinations, and moves each breaker: closed → open
-- when the failures in the rolling window reach the threshold and the failure rate; half_open →
-- closed when its probe succeeded, → open (a longer cool-down) when it failed. A Retry-After defers
-- the whole destination. One call per settle statement, destinations in name order: row locks are
-- taken in one global order, before the claim takes any (no two statements wait on each other).
-- Each destination costs one row write per statement, however many of its outcomes the statement
-- carries. `now_ts` is the statement's clock. Returns the transitions (for the log line and the metric).
CREATE FUNCTION "skiplock".record_destination_outcomes(
  names text[], job_ids bigint[], failed boolean[], defer_ms bigint[],
  thresholds integer[], rates real[], windows_ms integer[], cool_downs_ms integer[], max_cool_downs_ms integer[],
  now_ts timestamptz)
RETURNS TABLE (destination text, from_state text, to_state text, open_until timestamptz, failures integer, calls integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  a record;
  d "skiplock".destinations%ROWTYPE;
  win interval;
  frac float8;
  est_failures float8;
  est_calls float8;
  next_state text;
  probe_failed boolean;
BEGIN
  FOR a IN
    SELECT u.name, count(*)::int AS calls, count(*) FILTER (WHERE u.failed)::int AS fails,
      max(u.defer_ms) AS defer_ms, array_agg(u.job_id) AS ids,
      array_agg(u.job_id) FILTER (WHERE u.failed) AS failed_ids,
      min(u.threshold) AS threshold, min(u.rate) AS rate, min(u.window_ms) AS window_ms,
      min(u.cool_down_ms) AS cool_down_ms, max(u.max_cool_down_ms) AS max_cool_down_ms
    FROM unnest(names, job_ids, failed, defer_ms, thresholds, rates, windows_ms, cool_downs_ms, max_cool_downs_ms)
      AS u(name, job_id, failed, defer_ms, threshold, rate, window_ms, cool_down_ms, max_cool_down_ms)
    GROUP BY u.name
    ORDER BY u.name
  LOOP
    INSERT INTO "skiplock".destinations (name) VALUES (a.name) ON CONFLICT (name) DO NOTHING;
    SELECT * INTO d FROM "skiplock".destinations x WHERE x.name = a.name FOR UPDATE;
    win := make_interval(secs => a.window_ms / 1000.0);
    -- Two fixed windows, the previous one weighted by how much of it still overlaps the rolling one.
    IF d.window_start IS NULL OR now_ts >= d.window_start + 2 * win THEN
      d.prev_calls := 0; d.prev_failures := 0; d.window_calls := 0; d.window_failures := 0;
      d.window_start := now_ts;
    ELSIF now_ts >= d.window_start + win THEN
      d.prev_calls := d.window_calls; d.prev_failures := d.window_failures;
      d.window_calls := 0; d.window_failures := 0;
      d.window_start := d.window_start + win;
    END IF;
    d.window_calls := d.window_calls + a.calls;
    d.window_failures := d.window_failures + a.fails;
    frac := greatest(0, least(1, extract(epoch FROM now_ts - d.window_start) * 1000 / a.window_ms));
    est_failures := d.prev_failures * (1 - frac) + d.window_failures;
    est_calls := d.prev_calls * (1 - frac) + d.window_calls;
    -- A deferral that ended is forgotten (the row leaves destinations_attention_idx when closed).
    IF d.deferred_until <= now_ts THEN
      d.deferred_until := NULL;
    END IF;
    IF a.defer_ms IS NOT NULL THEN
      d.deferred_until := greatest(d.deferred_until, now_ts + make_interval(secs => least(a.defer_ms, 86400000) / 1000.0));
    END IF;
    next_state := d.state;
    IF d.state = 'half_open' AND d.probe_job = ANY (a.ids) THEN
      probe_failed := d.probe_job = ANY (coalesce(a.failed_ids, '{}'));
      IF probe_failed THEN
        next_state := 'open';
        d.trips := d.trips + 1;
      ELSE
        next_state := 'closed';
        d.trips := 0;
        d.prev_calls := 0; d.prev_failures := 0; d.window_calls := 0; d.window_failures := 0;
        d.window_start := now_ts;
      END IF;
      d.probe_job := NULL;
      d.probe_until := NULL;
    ELSIF d.state = 'closed' AND a.fails > 0 AND est_failures >= a.threshold AND est_failures >= a.rate * est_calls THEN
      next_state := 'open';
      d.trips := 1;
    END IF;
    IF next_state = 'open' AND d.state <> 'open' THEN
      d.opened_at := now_ts;
      d.open_until := now_ts + make_interval(secs =>
        least(a.cool_down_ms * power(2, least(d.trips - 1, 30)), a.max_cool_down_ms) / 1000.0);
    ELSIF next_state = 'closed' THEN
      d.opened_at := NULL;
      d.open_until := NULL;
    END IF;
    UPDATE "skiplock".destinations x SET
      state = next_state, window_start = d.window_start, window_calls = d.window_calls,
      window_failures = d.window_failures, prev_calls = d.prev_calls, prev_failures = d.prev_failures,
      window_ms = a.window_ms, trips = d.trips, opened_at = d.opened_at, open_until = d.open_until, probe_job = d.probe_job,
      probe_until = d.probe_until, deferred_until = d.deferred_until,
      changed_at = CASE WHEN next_state <> d.state THEN now_ts ELSE x.changed_at END,
      changed_by = CASE WHEN next_state <> d.state THEN 'worker' ELSE x.changed_by END,
      updated_at = now_ts
    WHERE x.name = a.name;
    IF next_state <> d.state THEN
      destination := a.name; from_state := d.state; to_state := next_state; open_until := d.open_until;
      failures := round(est_failures)::int; calls := round(est_calls)::int;
      RETURN NEXT;
    END IF;
  END LOOP;
END
$$;
--> statement-breakpoint
-- The half-open probe: for each destination whose cool-down ended (or whose probe's lease ran out),
-- at most one claim takes one job through, as its probe. A row another statement holds is skipped
-- (SKIP LOCKED: the claim never waits here), so exactly one claim wins each destination.
CREATE FUNCTION "skiplock".claim_probes(names text[], job_ids bigint[], leases_ms integer[], now_ts timestamptz)
RETURNS TABLE (destination text, job_id bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  p record;
  d "skiplock".destinations%ROWTYPE;
BEGIN
  FOR p IN
    SELECT DISTINCT ON (u.name) u.name, u.job_id, u.lease_ms
    FROM unnest(names, job_ids, leases_ms) AS u(name, job_id, lease_ms)
    ORDER BY u.name, u.job_id
  LOOP
    SELECT * INTO d FROM "skiplock".destinations x WHERE x.name = p.name FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    CONTINUE WHEN d.deferred_until > now_ts;
    CONTINUE WHEN NOT ((d.state = 'open' AND d.open_until <= now_ts)
      OR (d.state = 'half_open' AND d.probe_until <= now_ts));
    UPDATE "skiplock".destinations x SET state = 'half_open', probe_job = p.job_id,
      probe_until = now_ts + make_interval(secs => p.lease_ms / 1000.0),
      changed_at = CASE WHEN x.state <> 'half_open' THEN now_ts ELSE x.changed_at END,
      changed_by = CASE WHEN x.state <> 'half_open' THEN 'worker' ELSE x.changed_by END,
      updated_at = now_ts
    WHERE x.name = p.name;
    destination := p.name;
    job_id := p.job_id;
    RETURN NEXT;
  END LOOP;
END
$$;
--> statement-breakpoint
-- The destinations a claim must leave out (blocked: open and cooling down, probe in flight,
-- deferred) and those waiting for a probe. VOLATILE and never inlined (it has a SET clause): it
-- reads with a snapshot of its own, so a claim that calls it after its settle sees the breakers that
-- settle just opened, and claims nothing more for them.
CREATE FUNCTION "skiplock".held_destinations(now_ts timestamptz, OUT blocked text[], OUT probing text[])
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT
    coalesce(array_agg(d.name) FILTER (WHERE (d.state = 'open' AND d.open_until > now_ts)
      OR (d.state = 'half_open' AND d.probe_until > now_ts) OR d.deferred_until > now_ts), '{}'),
    coalesce(array_agg(d.name) FILTER (WHERE d.state <> 'closed'
      AND (d.deferred_until IS NULL OR d.deferred_until <= now_ts)
      AND ((d.state = 'open' AND d.open_until <= now_ts) OR (d.state = 'half_open' AND d.probe_until <= now_ts))), '{}')
  FROM "skiplock".destinations d
  WHERE d.state <> 'closed' OR d.deferred_until IS NOT NULL
$$;
