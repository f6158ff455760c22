CREATE TABLE "skiplock"."rate_buckets" (
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"key" text DEFAULT '' NOT NULL,
	"starts" timestamp with time zone[] DEFAULT '{}' NOT NULL,
	"counts" integer[] DEFAULT '{}' NOT NULL,
	"period_ms" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "rate_buckets_scope_name_key_pk" PRIMARY KEY("scope","name","key")
);
--> statement-breakpoint
CREATE TABLE "skiplock"."rate_limits" (
	"scope" text NOT NULL,
	"name" text NOT NULL,
	"max_starts" integer NOT NULL,
	"period_ms" integer NOT NULL,
	"set_at" timestamp with time zone NOT NULL,
	"set_by" text NOT NULL,
	"reason" text,
	CONSTRAINT "rate_limits_scope_name_pk" PRIMARY KEY("scope","name"),
	CONSTRAINT "rate_limits_scope_check" CHECK ("skiplock"."rate_limits"."scope" in ('queue', 'kind', 'key', 'destination')),
	CONSTRAINT "rate_limits_max_starts_check" CHECK ("skiplock"."rate_limits"."max_starts" >= 1),
	CONSTRAINT "rate_limits_period_check" CHECK ("skiplock"."rate_limits"."period_ms" between 1000 and 86400000)
);
--> statement-breakpoint
-- Rate limits: at most max_starts job starts in any period, per scope, across every invocation.
-- Always write the schema as "skiplock" (quoted): the migrator substitutes it, also inside strings
-- and function bodies.
--
-- A sliding window, strict: a scope's recent starts are kept (rate_buckets), and a claim may start
-- only as many as the last period leaves room for. It is a token bucket of max_starts tokens in which
-- each token comes back exactly one period after it was taken: a burst of max_starts at once is
-- allowed, never more than max_starts within any period. Start times are rounded up to 1/100 of the
-- period (a token comes back up to 1 % late; a bucket keeps at most ~200 entries).

-- How many more jobs each rate-limited scope may start now. A claim calls it once, after claim_room
-- (its advisory locks come after claim_room's: one global order, no two claims wait on each other).
-- For each scope, in lock order, it takes a transaction-scoped advisory lock, held until the claim
-- commits (record_rate_starts writes the starts under it), then counts the starts of the last
-- period with a snapshot of its own. It waits for locks until one scope has room, then skips scopes
-- another claim holds (room 0), as claim_room does. next_at: when the scope's next token comes back,
-- if the candidates want more than its room. It counts back from the moment it holds the lock, not
-- from the statement's start (`now_ts`; a test's supplied clock, when later, wins): a claim that
-- waited for the lock must not count from before the wait.
CREATE FUNCTION "skiplock".rate_room(scopes text[], names text[], keys text[], max_starts integer[],
  periods_ms integer[], demands integer[], now_ts timestamptz)
RETURNS TABLE (rate_scope text, rate_name text, rate_key text, room integer, next_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s record;
  used bigint;
  oldest timestamptz;
  got boolean;
  have_room boolean := false;
  period interval;
  t timestamptz;
BEGIN
  FOR s IN
    SELECT u.scope, u.name, u.key, u.max_starts, u.period_ms, u.demand,
      hashtextextended('"skiplock"' || chr(31) || 'rate' || chr(31) || u.scope || chr(31) || u.name || chr(31) || u.key, 0)
        AS lock_key
    FROM unnest(scopes, names, keys, max_starts, periods_ms, demands)
      AS u(scope, name, key, max_starts, period_ms, demand)
    ORDER BY lock_key
  LOOP
    period := make_interval(secs => s.period_ms / 1000.0);
    rate_scope := s.scope;
    rate_name := s.name;
    rate_key := s.key;
    IF have_room THEN
      got := pg_try_advisory_xact_lock(s.lock_key);
    ELSE
      PERFORM pg_advisory_xact_lock(s.lock_key);
      got := true;
    END IF;
    IF NOT got THEN
      -- Another claim is taking this scope's starts: look again after one token's share of the period.
      room := 0;
      next_at := greatest(now_ts, clock_timestamp()) + period / s.max_starts;
      RETURN NEXT;
      CONTINUE;
    END IF;
    t := greatest(now_ts, clock_timestamp());
    SELECT coalesce(sum(x.n), 0), min(x.at) INTO used, oldest
    FROM "skiplock".rate_buckets b CROSS JOIN LATERAL unnest(b.starts, b.counts) AS x(at, n)
    WHERE b.scope = s.scope AND b.name = s.name AND b.key = s.key AND x.at > t - period;
    room := greatest(s.max_starts - used, 0)::int;
    next_at := CASE WHEN s.demand > room THEN coalesce(oldest, t) + period END;
    have_room := have_room OR room > 0;
    RETURN NEXT;
  END LOOP;
END
$$;
--> statement-breakpoint
-- Records the starts a claim took, under the advisory locks rate_room took for their scopes: one
-- entry per scope and claim, at the end of the claim (the jobs start when it commits, not when it
-- began; a test's supplied clock, when later, wins) rounded up to 1/100 of the period; entries older than two
-- periods dropped (a claim that started a moment before another may still count back one period from
-- its own clock), the period kept for listings. Returns how many scopes it wrote.
CREATE FUNCTION "skiplock".record_rate_starts(scopes text[], names text[], keys text[], counts integer[],
  periods_ms integer[], now_ts timestamptz)
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  s record;
  g bigint;
  at_ts timestamptz;
  written integer := 0;
BEGIN
  FOR s IN
    SELECT u.scope, u.name, u.key, sum(u.n)::int AS n, max(u.period_ms) AS period_ms
    FROM unnest(scopes, names, keys, counts, periods_ms) AS u(scope, name, key, n, period_ms)
    GROUP BY u.scope, u.name, u.key
  LOOP
    g := greatest(1, ceil(s.period_ms / 100.0))::bigint;
    at_ts := to_timestamp(ceil(extract(epoch FROM greatest(now_ts, clock_timestamp())) * 1000 / g) * g / 1000.0);
    INSERT INTO "skiplock".rate_buckets AS b (scope, name, key, starts, counts, period_ms, updated_at)
    VALUES (s.scope, s.name, s.key, ARRAY[at_ts], ARRAY[s.n], s.period_ms, now_ts)
    ON CONFLICT (scope, name, key) DO UPDATE SET
      (starts, counts) = (
        SELECT coalesce(array_agg(y.at ORDER BY y.at), '{}'), coalesce(array_agg(y.n ORDER BY y.at), '{}')
        FROM (
          SELECT o.at, sum(o.n)::int AS n FROM (
            SELECT e.at, e.n FROM unnest(b.starts, b.counts) AS e(at, n)
            WHERE e.at > now_ts - 2 * make_interval(secs => s.period_ms / 1000.0)
            UNION ALL SELECT at_ts, s.n
          ) o
          GROUP BY o.at
        ) y),
      period_ms = s.period_ms, updated_at = now_ts;
    written := written + 1;
  END LOOP;
  RETURN written;
END
$$;
