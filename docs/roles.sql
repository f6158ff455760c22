-- Least-privilege roles for skiplock. Run as the owner of the "skiplock" schema (the role
-- that ran the migrations), after migrating. Replace the passwords; rename freely.
--
-- skiplock_worker: runs invocations, maintenance and replays. It reads and updates jobs and
-- deletes finished ones (retention); it cannot insert jobs.
-- skiplock_enqueuer: enqueues. It inserts jobs, reads only the columns dedupe needs, and
-- (for `replace` dedupe only) reads and updates the fields replace replaces.

CREATE ROLE skiplock_worker LOGIN PASSWORD 'change-me-worker';
GRANT USAGE ON SCHEMA "skiplock" TO skiplock_worker;
GRANT SELECT, UPDATE, DELETE ON "skiplock".jobs TO skiplock_worker;
GRANT SELECT ON "skiplock".job_status, "skiplock".queue_stats TO skiplock_worker;
-- Completion counts, written by workers that delete completed jobs and pruned by maintenance.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".completed_counts TO skiplock_worker;
-- Jobs finished per minute, rolled up by maintenance and the console, pruned by maintenance.
GRANT SELECT, INSERT, DELETE ON "skiplock".activity_rollups TO skiplock_worker;
-- Registrations of running invocations (a cap on how many run at once).
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".invocations TO skiplock_worker;
-- Pauses: every claim reads them; the control function (worker credentials) sets and clears them.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".pauses TO skiplock_worker;
-- Concurrency limits set at run time: the same. (claim_room, the claim's limit check, is a
-- function every role may call.)
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".limits TO skiplock_worker;
-- Destination health (circuit breakers, Retry-After deferrals): every settle that carries attempts
-- against a destination writes its row, claims read them, the control function resets them.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".destinations TO skiplock_worker;
-- Rate limits: every rated claim reads the rates and writes the starts it took; the control function
-- sets and clears rates.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".rate_limits, "skiplock".rate_buckets TO skiplock_worker;
-- Schedules: a worker's tick records each schedule it runs and when it last fired.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".schedules TO skiplock_worker;
-- Run-time schedules: every invocation's first statement reads whether one is due, a tick claims and
-- moves them; the control function, the console and the CLI (worker credentials) create, pause,
-- resume and delete them. A tick also inserts their jobs: see the two grants below.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".runtime_schedules TO skiplock_worker;
-- The operator console (run with the worker's credentials, like the control function): its sessions
-- and its failed-login counts.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".console_sessions, "skiplock".console_logins TO skiplock_worker;
-- Durable steps: a worker records each step (ctx.step, ctx.sleep), takes the signals its jobs
-- wait for (ctx.waitForSignal), and maintenance prunes both.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".job_steps TO skiplock_worker;
GRANT SELECT, UPDATE, DELETE ON "skiplock".signals TO skiplock_worker;
-- What each worker serves (its queues and kinds), recorded by its invocations, read by the stats.
GRANT SELECT, INSERT, UPDATE ON "skiplock".workers TO skiplock_worker;
-- Events: a worker records its subscribers' subscriptions (with its row in workers), maintenance
-- prunes events past their retention (UPDATE: it locks the rows it deletes, SKIP LOCKED) and reads
-- those no one subscribed to, the console reads them.
GRANT SELECT, INSERT, UPDATE ON "skiplock".subscriptions TO skiplock_worker;
GRANT SELECT, UPDATE, DELETE ON "skiplock".events TO skiplock_worker;
GRANT SELECT, DELETE ON "skiplock".event_deliveries TO skiplock_worker;
-- Maintenance's reconcile gives a new subscription the events published around its activation: it
-- writes jobs. Give the worker these grants too (and the two below), or it skips the reconcile
-- (reconciledDeliveries: null) and a subscriber relies on `skiplock sync` before it is published
-- to, and on `skiplock events replay`.
-- GRANT INSERT ON "skiplock".event_deliveries TO skiplock_worker;
-- A worker that runs schedules (createWorker({ schedules }), or run-time schedules: createSchedule)
-- also enqueues their occurrences: give it these two grants as well (an enqueuer's insert rights),
-- or run the schedules with the enqueuer's credentials. Without schedules, leave them out: the
-- worker then cannot insert jobs (a run-time schedule that comes due is then logged as
-- schedule_tick_failed at each invocation; set runtimeSchedules: false on such workers).
-- GRANT INSERT ON "skiplock".jobs TO skiplock_worker;
-- GRANT USAGE ON SEQUENCE "skiplock".jobs_id_seq TO skiplock_worker;
-- A claim must never wait on a lock for long, and a worker never sits idle in a transaction.
ALTER ROLE skiplock_worker SET statement_timeout = '10s';
ALTER ROLE skiplock_worker SET idle_in_transaction_session_timeout = '60s';
-- No JIT compilation: a claim over a large keyed backlog is estimated above jit_above_cost and
-- compiling it takes longer than running it. skiplock turns it off for its own statements on every
-- driver; this covers every other statement the role runs.
ALTER ROLE skiplock_worker SET jit = off;

CREATE ROLE skiplock_enqueuer LOGIN PASSWORD 'change-me-enqueuer';
GRANT USAGE ON SCHEMA "skiplock" TO skiplock_enqueuer;
GRANT INSERT ON "skiplock".jobs TO skiplock_enqueuer;
GRANT USAGE ON SEQUENCE "skiplock".jobs_id_seq TO skiplock_enqueuer;
GRANT SELECT (id, kind, state, dedupe_key, dedupe_mode, dedupe_window, attempted_at) ON "skiplock".jobs TO skiplock_enqueuer;
-- Ordering keys: a new job waits behind a live job of its key.
GRANT SELECT (ordering_key, ordering_hold) ON "skiplock".jobs TO skiplock_enqueuer;
-- Run-time schedules (createSchedule, applySchedules…): written in the app's transactions.
GRANT SELECT, INSERT, UPDATE, DELETE ON "skiplock".runtime_schedules TO skiplock_enqueuer;
-- Signals (signal()): the enqueuer stores them and wakes the jobs waiting on their key.
GRANT INSERT, SELECT (id) ON "skiplock".signals TO skiplock_enqueuer;
GRANT USAGE ON SEQUENCE "skiplock".signals_id_seq TO skiplock_enqueuer;
GRANT SELECT (job_id, state, signal_key) ON "skiplock".job_steps TO skiplock_enqueuer;
GRANT SELECT (run_at), UPDATE (run_at, updated_at) ON "skiplock".jobs TO skiplock_enqueuer;
-- Dependencies (enqueue `after`): a child's id is appended to each existing parent's dependents.
GRANT SELECT (dependents), UPDATE (dependents) ON "skiplock".jobs TO skiplock_enqueuer;
-- Only if you use dedupe mode 'replace'. PostgreSQL counts reading the proposed row
-- (excluded.payload, …) in ON CONFLICT DO UPDATE as reading the column, so replace also
-- needs SELECT on the replaced columns: an enqueuer that uses replace can read payloads.
GRANT UPDATE (payload, run_at, priority, queue, max_attempts, deadline, correlation_id, concurrency_key, destination, updated_at)
  ON "skiplock".jobs TO skiplock_enqueuer;
GRANT SELECT (payload, run_at, priority, queue, max_attempts, deadline, correlation_id, concurrency_key, destination)
  ON "skiplock".jobs TO skiplock_enqueuer;
-- Events (publish): the subscriptions the statement reads, the event, and a delivery per job.
GRANT SELECT ON "skiplock".subscriptions TO skiplock_enqueuer;
GRANT INSERT, SELECT (id, name, payload, dedupe_key, subscribers) ON "skiplock".events TO skiplock_enqueuer;
GRANT USAGE ON SEQUENCE "skiplock".events_id_seq TO skiplock_enqueuer;
GRANT INSERT, SELECT (job_id) ON "skiplock".event_deliveries TO skiplock_enqueuer;
ALTER ROLE skiplock_enqueuer SET statement_timeout = '10s';
