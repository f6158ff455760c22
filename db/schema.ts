import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  type PgSchema,
  pgSchema,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

import { DEDUPE_MODES, JOB_STATES } from '../base/rows.js';

export { DEDUPE_MODES, type DedupeMode, JOB_STATES, type JobState } from '../base/rows.js';

/**
 * The skiplock tables. drizzle-kit generates `db/migrations` from the default schema
 * below; `jobsTableIn()` builds the same table for any other (validated) schema name,
 * which is what the runtime statements reference.
 *
 * Partial-index predicates are written with sql`` on purpose: drizzle-kit 0.31 turns
 * eq(...) in an index WHERE into `$1` placeholders, which is invalid DDL.
 */
const tz = { withTimezone: true, mode: 'date' } as const;

export function jobsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'jobs',
    {
      // Columns that never change after enqueue come first, the ones claims and outcomes
      // rewrite come last: an UPDATE that stays on its page logs only the bytes that differ
      // from the old row version, so the payload and the rest of the head cost no WAL.
      id: bigint('id', { mode: 'bigint' }).primaryKey().generatedByDefaultAsIdentity({ name: 'jobs_id_seq' }),
      kind: text('kind').notNull(),
      createdAt: timestamp('created_at', tz).notNull().defaultNow(),
      correlationId: text('correlation_id'),
      dedupeKey: text('dedupe_key'),
      dedupeMode: text('dedupe_mode', { enum: DEDUPE_MODES }),
      dedupeWindow: timestamp('dedupe_window', tz),
      // Ordering key: at most one job of a key runs at a time, in id order. A follower waits
      // "parked" (run_at = infinity) until the job before it ends.
      orderingKey: text('ordering_key'),
      // Whether a dead job of this key holds the key until it is replayed (kind option orderingOnDead).
      orderingHold: boolean('ordering_hold').notNull().default(false),
      // Concurrency key (e.g. a tenant): keyed jobs are claimed key by key (fair share), and a queue's
      // per-key limit counts the running jobs of one key in that queue.
      concurrencyKey: text('concurrency_key'),
      // Destination (e.g. a partner's host): its circuit breaker and Retry-After deferrals decide
      // whether the job may be claimed (the table destinations).
      destination: text('destination'),
      // Replaceable by `replace` dedupe while the job waits.
      queue: text('queue').notNull().default('default'),
      priority: smallint('priority').notNull().default(0),
      maxAttempts: integer('max_attempts').notNull().default(25),
      deadline: timestamp('deadline', tz),
      payload: jsonb('payload').notNull().default({}),
      // Rewritten by claims and outcomes.
      runAt: timestamp('run_at', tz).notNull().defaultNow(),
      // In this order so that each update's changed bytes lie together: PostgreSQL logs an update
      // that stays on its page as the span from the first changed byte to the last. A claim writes
      // attempt through updated_at; a completion only state through updated_at (about 30 bytes, not
      // the ~100 it logged when attempt, the token and the holder sat between them).
      attempt: integer('attempt').notNull().default(0),
      leaseToken: uuid('lease_token'),
      lockedBy: text('locked_by'),
      startedAt: timestamp('started_at', tz),
      attemptedAt: timestamp('attempted_at', tz),
      state: text('state', { enum: JOB_STATES }).notNull().default('queued'),
      leaseExpiresAt: timestamp('lease_expires_at', tz),
      finishedAt: timestamp('finished_at', tz),
      updatedAt: timestamp('updated_at', tz).notNull().defaultNow(),
      // Written on failures, progress reports and replays only.
      deadReason: text('dead_reason'),
      progress: jsonb('progress'),
      /** What the handler returned (JSON, bounded by the worker's maxResultBytes), written with its completion. */
      result: jsonb('result'),
      lastError: jsonb('last_error'),
      errors: jsonb('errors').notNull().default([]),
      replayCount: integer('replay_count').notNull().default(0),
      replayedAt: timestamp('replayed_at', tz),
      replayedBy: text('replayed_by'),
      // Dependencies. A child lists the parents it waits for (enqueue `after`) and waits parked
      // (run_at = infinity) until every one completed; a parent lists its children, written by their
      // enqueue under the parent's row lock, so the trigger that sees the parent end
      // (jobs_dependents) finds each of them. on_parent_failure: what a parent's death or
      // cancellation does to the child ('cancel': cancelled as dependency_failed; 'run').
      after: bigint('after', { mode: 'bigint' }).array(),
      onParentFailure: text('on_parent_failure', { enum: ['cancel', 'run'] }),
      dependents: bigint('dependents', { mode: 'bigint' }).array(),
      // The enqueue's trace context (W3C traceparent and tracestate), written when tracing is on:
      // each attempt's span links to it.
      traceContext: jsonb('trace_context'),
    },
    (t) => [
      check('jobs_state_check', sql`${t.state} in ('queued', 'running', 'completed', 'dead', 'cancelled')`),
      check('jobs_priority_check', sql`${t.priority} between -1000 and 1000`),
      check('jobs_attempt_check', sql`${t.attempt} >= 0 and ${t.maxAttempts} >= 1`),
      // finished_at is set exactly when the job reached a terminal state.
      check(
        'jobs_finished_at_check',
        sql`(${t.state} in ('completed', 'dead', 'cancelled')) = (${t.finishedAt} is not null)`,
      ),
      // A running job always has a holder: a lease token and an expiry.
      check(
        'jobs_running_lease_check',
        sql`${t.state} <> 'running' or (${t.leaseToken} is not null and ${t.leaseExpiresAt} is not null)`,
      ),
      // Every dead job says why; no live job carries a reason. A cancelled job may say why
      // (dependency_failed: a parent died or was cancelled).
      check(
        'jobs_dead_reason_check',
        sql`case ${t.state} when 'dead' then ${t.deadReason} is not null
          when 'cancelled' then true else ${t.deadReason} is null end`,
      ),
      check(
        'jobs_after_check',
        sql`(${t.after} is null) = (${t.onParentFailure} is null)
          and (${t.onParentFailure} is null or ${t.onParentFailure} in ('cancel', 'run'))`,
      ),
      check(
        'jobs_dedupe_check',
        sql`(${t.dedupeKey} is null) = (${t.dedupeMode} is null)
          and (${t.dedupeMode} is null or ${t.dedupeMode} in ('skip', 'replace', 'window'))
          and (${t.dedupeWindow} is not null) = (coalesce(${t.dedupeMode}, '') = 'window')`,
      ),
      // Claiming reads only runnable rows, in the claim's sort order. Jobs with a concurrency key are
      // not here: a claim reaches them key by key (jobs_keyed_idx), so one key's backlog is never
      // walked row by row to find another key's jobs.
      index('jobs_claim_idx').on(t.priority, t.runAt, t.id).where(sql`state = 'queued' and concurrency_key is null`),
      // The same order within one of CLAIM_LANES lanes (runs of LANE_RUN consecutive ids): many
      // concurrent invocations spread their claims over the lanes instead of all walking the head.
      index('jobs_claim_lane_idx')
        .on(sql`((id / 64) % 16)`, t.priority, t.runAt, t.id)
        .where(sql`state = 'queued' and concurrency_key is null`),
      // Keyed jobs by key, in a hashed key order (a claim starts its walk over the keys at a random
      // hash: every key gets its turn), then in claim order within the key.
      index('jobs_keyed_idx')
        .on(sql`hashtext(concurrency_key)`, t.queue, t.concurrencyKey, t.priority, t.runAt, t.id)
        .where(sql`state = 'queued' and concurrency_key is not null`),
      // Running keyed jobs per queue and key: what a per-key limit counts. Only keyed rows: an index
      // every claim writes the same key into made 16 concurrent claimers 20 % slower. Queue and kind
      // limits count the running rows through jobs_lease_idx.
      index('jobs_running_keyed_idx')
        .on(t.queue, t.concurrencyKey)
        .where(sql`state = 'running' and concurrency_key is not null`),
      // Ordering keys: the live jobs of a key in id order (the claim's predecessor check); at most
      // one running per key, enforced by the database even when two heads race; parked followers.
      index('jobs_ordering_idx')
        .on(t.orderingKey, t.id)
        .where(sql`ordering_key is not null and state in ('queued', 'running', 'dead')`),
      // The jobs that hold their key — running, queued to run (ready or retrying), or dead and holding
      // it — by key and id: the claim's and the release's "is anything ahead of this job?" reads
      // a key's few holders here, not its backlog of parked followers. Written without `state` so
      // that those look-ups match this index alone (no other index's predicate follows from it).
      index('jobs_ordering_blockers_idx')
        .on(t.orderingKey, t.id)
        .where(
          sql`ordering_key is not null and ((finished_at is null and run_at <> 'infinity') or (dead_reason is not null and ordering_hold))`,
        ),
      uniqueIndex('jobs_ordering_running_uq')
        .on(t.orderingKey)
        .where(sql`ordering_key is not null and state = 'running'`),
      index('jobs_parked_idx')
        .on(t.orderingKey, t.id)
        .where(sql`ordering_key is not null and state = 'queued' and run_at = 'infinity'`),
      // Rescue of expired leases reads only running rows, by expiry; so do the counts of all running
      // rows of a queue or kind, which must say `lease_expires_at is not null` too (runningRow()).
      // That second condition keeps this index out of look-ups on the other indexes of running rows
      // (ordering key, concurrency key): their predicates alone imply `state = 'running'`, and when
      // the statistics last saw no running row every such index costs the same, so the planner
      // walked all running rows here for each candidate (a claim of 500 over 1,000 ordering keys:
      // 380 ms instead of a few).
      index('jobs_lease_idx').on(t.leaseExpiresAt).where(sql`state = 'running' and lease_expires_at is not null`),
      // DLQ listing, replay filters and retention pruning.
      index('jobs_finished_idx').on(t.state, t.finishedAt).where(sql`finished_at is not null`),
      // The DLQ's size per queue and kind (queue_stats, `skiplock stats`): an index-only count, where
      // counting through jobs_finished_idx read every dead row (a seq scan once they are many).
      index('jobs_dead_idx').on(t.queue, t.kind).where(sql`state = 'dead'`),
      index('jobs_deadline_idx').on(t.deadline).where(sql`state = 'queued' and deadline is not null`),
      // Dedupe modes, enforced by the database so they hold under concurrency:
      // skip — one active (queued or running) job per kind and key;
      uniqueIndex('jobs_dedupe_active_uq')
        .on(t.kind, t.dedupeKey)
        .where(sql`dedupe_mode = 'skip' and state in ('queued', 'running')`),
      // replace — one waiting, never-attempted job per kind and key. A running one may coexist
      // and is never touched; once attempted, a job leaves the index, so its retry (or release)
      // can never collide with the newer job that took the key meanwhile.
      uniqueIndex('jobs_dedupe_waiting_uq')
        .on(t.kind, t.dedupeKey)
        .where(sql`dedupe_mode = 'replace' and state = 'queued' and attempted_at is null`),
      // window — one job per kind, key and period, whatever its state.
      uniqueIndex('jobs_dedupe_window_uq').on(t.kind, t.dedupeKey, t.dedupeWindow).where(sql`dedupe_mode = 'window'`),
    ],
  );
}

/**
 * Completions counted per minute, queue and kind, for workers that delete completed jobs
 * (`completedJobs: 'delete'`): the stats read these counts where no row is left to count.
 * Append-only — each settle statement adds one row per queue and kind, with no unique key —
 * so concurrent workers never wait on each other here (an upsert on a shared row deadlocked
 * under load). Maintenance rolls finished minutes up into one row each and prunes old ones.
 */
export function completedCountsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'completed_counts',
    {
      minute: timestamp('minute', tz).notNull(),
      queue: text('queue').notNull(),
      kind: text('kind').notNull(),
      completed: bigint('completed', { mode: 'number' }).notNull(),
    },
    (t) => [index('completed_counts_minute_idx').on(t.minute)],
  );
}

/**
 * Jobs finished per minute, queue and kind (completed, dead, cancelled), rolled up from the jobs
 * table and completed_counts once a minute has closed (rollUpActivity: maintenance and the console
 * run it). The stats and the console's charts read these for closed minutes and the jobs table only
 * for the minutes since: a day of 2,000,000 finished jobs took 1.5 s to chart from the table.
 */
export function activityRollupsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'activity_rollups',
    {
      minute: timestamp('minute', tz).notNull(),
      queue: text('queue').notNull(),
      kind: text('kind').notNull(),
      completed: bigint('completed', { mode: 'number' }).notNull().default(0),
      dead: bigint('dead', { mode: 'number' }).notNull().default(0),
      cancelled: bigint('cancelled', { mode: 'number' }).notNull().default(0),
    },
    (t) => [primaryKey({ name: 'activity_rollups_pk', columns: [t.minute, t.queue, t.kind] })],
  );
}

/**
 * The durable steps of jobs (`ctx.step`, `ctx.sleep`): one row per step a job reached, with its
 * stored result once it completed, so a retry, a rescue or a later invocation returns that result
 * instead of running the step again. `position` is the order the job's code reached its steps in:
 * a run that reaches them in another order is refused (the code changed under a running job).
 * No foreign key to jobs: a key would make every delete of a finished job (delete mode, pruning)
 * look here; maintenance prunes the steps of jobs that are gone instead.
 */
export function jobStepsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'job_steps',
    {
      jobId: bigint('job_id', { mode: 'bigint' }).notNull(),
      name: text('name').notNull(),
      position: integer('position').notNull(),
      // 'sleep': recorded completed as the job goes to sleep (reaching it again must not sleep again),
      // with its end in `timeout_at`; listSteps reports it 'sleeping' until then.
      // 'signal': a wait for a signal on `signal_key`, 'waiting' until one comes or `timeout_at`.
      type: text('type', { enum: ['run', 'sleep', 'signal'] })
        .notNull()
        .default('run'),
      state: text('state', { enum: ['completed', 'failed', 'waiting'] }).notNull(),
      attempts: integer('attempts').notNull().default(0),
      result: jsonb('result'),
      lastError: jsonb('last_error'),
      durationMs: integer('duration_ms'),
      startedAt: timestamp('started_at', tz),
      finishedAt: timestamp('finished_at', tz),
      signalKey: text('signal_key'),
      timeoutAt: timestamp('timeout_at', tz),
    },
    (t) => [
      primaryKey({ name: 'job_steps_pk', columns: [t.jobId, t.name] }),
      uniqueIndex('job_steps_position_idx').on(t.jobId, t.position),
      // The jobs waiting for a key's signal: what signal() wakes.
      index('job_steps_waiting_idx').on(t.signalKey).where(sql`state = 'waiting'`),
      check('job_steps_state_check', sql`${t.state} in ('completed', 'failed', 'waiting')`),
      check('job_steps_type_check', sql`${t.type} in ('run', 'sleep', 'signal')`),
      check('job_steps_position_check', sql`${t.position} >= 0 and ${t.attempts} >= 0`),
      // A completed step says when; a failed one says why; a wait names its key and its timeout.
      check(
        'job_steps_outcome_check',
        sql`case ${t.state} when 'completed' then ${t.finishedAt} is not null
          when 'failed' then ${t.lastError} is not null
          else ${t.type} = 'signal' and ${t.signalKey} is not null and ${t.timeoutAt} is not null end`,
      ),
    ],
  );
}

/**
 * The workers that ran lately and what they serve: a row per worker name and set of queues and kinds,
 * its `seen_at` moved by the worker's invocations (at most once a minute per warm instance, inside the
 * statement each invocation starts with). The stats flag ready jobs on a queue and kind no worker
 * served lately (a queue name in code that no deployed worker lists), and those whose kind's timeout
 * fits the invocations of none of the workers serving it.
 */
export function workersTableIn(schema: PgSchema<string>) {
  return schema.table(
    'workers',
    {
      name: text('name').notNull(),
      // md5 of the queues and kinds below: one row per distinct deployment of a worker name.
      served: text('served').notNull(),
      // null: every queue.
      queues: text('queues').array(),
      kinds: text('kinds').array().notNull(),
      seenAt: timestamp('seen_at', tz).notNull(),
      // The time its last recorded invocation had for attempts (what it had left as it started, less
      // safetyMarginMs), and its kinds whose timeoutMs is longer: it never claims those. Null: a
      // worker of a release that did not record them.
      budgetMs: integer('budget_ms'),
      unfitKinds: text('unfit_kinds').array(),
    },
    (t) => [primaryKey({ name: 'workers_pk', columns: [t.name, t.served] })],
  );
}

/**
 * Signals (`signal(db, key, payload)`), kept until a job's `ctx.waitForSignal` on their key takes
 * them — also when they were sent before the wait began. Each signal is taken by one wait.
 * Maintenance prunes taken signals, and untaken ones after their retention.
 */
export function signalsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'signals',
    {
      id: bigint('id', { mode: 'bigint' }).primaryKey().generatedByDefaultAsIdentity({ name: 'signals_id_seq' }),
      key: text('key').notNull(),
      payload: jsonb('payload'),
      sentAt: timestamp('sent_at', tz).notNull(),
      takenBy: bigint('taken_by', { mode: 'bigint' }),
      takenAt: timestamp('taken_at', tz),
      // The id of the callback token it came through (the signal route): each token sends once.
      tokenId: text('token_id'),
    },
    (t) => [
      index('signals_pending_idx').on(t.key, t.id).where(sql`taken_by is null`),
      uniqueIndex('signals_token_idx').on(t.tokenId).where(sql`token_id is not null`),
      check('signals_taken_check', sql`(${t.takenBy} is null) = (${t.takenAt} is null)`),
    ],
  );
}

/**
 * The invocations running right now, per worker, for a cap on how many run at once (fan-out,
 * nudges). A row is a slot: the primary key (worker, slot) is what makes the cap hold when two
 * invocations start at the same instant, and a slot whose expires_at has passed is free again —
 * a crashed invocation stops counting when its budget would have ended, with no cleanup process.
 */
export function invocationsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'invocations',
    {
      worker: text('worker').notNull(),
      slot: smallint('slot').notNull(),
      invocationId: text('invocation_id').notNull(),
      startedAt: timestamp('started_at', tz).notNull(),
      expiresAt: timestamp('expires_at', tz).notNull(),
    },
    (t) => [primaryKey({ columns: [t.worker, t.slot] }), check('invocations_slot_check', sql`${t.slot} >= 1`)],
  );
}

/**
 * Paused queues and kinds: a claim takes no job whose queue or kind has a row here (flow control,
 * enforced by the database for every invocation). A row is the pause: deleting it resumes.
 */
export function pausesTableIn(schema: PgSchema<string>) {
  return schema.table(
    'pauses',
    {
      scope: text('scope').notNull(),
      name: text('name').notNull(),
      pausedAt: timestamp('paused_at', tz).notNull(),
      pausedBy: text('paused_by').notNull(),
      reason: text('reason'),
    },
    (t) => [
      primaryKey({ columns: [t.scope, t.name] }),
      check('pauses_scope_check', sql`${t.scope} in ('queue', 'kind')`),
    ],
  );
}

/**
 * Concurrency limits set at run time (CLI, API, control route): each overrides the limit the code
 * declares for the same scope. `queue` — running jobs in the queue; `kind` — running jobs of the
 * kind; `key` — running jobs of one concurrency key in the queue `name`.
 */
export function limitsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'limits',
    {
      scope: text('scope').notNull(),
      name: text('name').notNull(),
      maxRunning: integer('max_running').notNull(),
      setAt: timestamp('set_at', tz).notNull(),
      setBy: text('set_by').notNull(),
      reason: text('reason'),
    },
    (t) => [
      primaryKey({ columns: [t.scope, t.name] }),
      check('limits_scope_check', sql`${t.scope} in ('queue', 'kind', 'key')`),
      check('limits_max_running_check', sql`${t.maxRunning} >= 1`),
    ],
  );
}

/**
 * What skiplock remembers of each destination jobs name: its circuit breaker (closed, open, half_open
 * with one probe job), the counts of the rolling window (two fixed windows of `window_ms`), a
 * Retry-After deferral of the whole destination. Written by record_destination_outcomes (settles),
 * claim_probes (claims) and a reset (CLI, API, control route); see migration 0014.
 */
export function destinationsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'destinations',
    {
      name: text('name').primaryKey(),
      state: text('state', { enum: ['closed', 'open', 'half_open'] })
        .notNull()
        .default('closed'),
      windowStart: timestamp('window_start', tz),
      windowMs: integer('window_ms').notNull().default(60_000),
      windowCalls: integer('window_calls').notNull().default(0),
      windowFailures: integer('window_failures').notNull().default(0),
      prevCalls: integer('prev_calls').notNull().default(0),
      prevFailures: integer('prev_failures').notNull().default(0),
      trips: integer('trips').notNull().default(0),
      openedAt: timestamp('opened_at', tz),
      openUntil: timestamp('open_until', tz),
      probeJob: bigint('probe_job', { mode: 'bigint' }),
      probeUntil: timestamp('probe_until', tz),
      deferredUntil: timestamp('deferred_until', tz),
      changedAt: timestamp('changed_at', tz).notNull().defaultNow(),
      changedBy: text('changed_by'),
      updatedAt: timestamp('updated_at', tz).notNull().defaultNow(),
    },
    (t) => [
      check('destinations_state_check', sql`${t.state} in ('closed', 'open', 'half_open')`),
      // An open breaker knows when it may probe; a half-open one, which job probes and until when.
      check('destinations_open_check', sql`${t.state} <> 'open' or ${t.openUntil} is not null`),
      check(
        'destinations_half_open_check',
        sql`${t.state} <> 'half_open' or (${t.probeJob} is not null and ${t.probeUntil} is not null)`,
      ),
      // The rows every claim asks about (is any breaker not closed, any deferral?): few, by design.
      index('destinations_attention_idx').on(t.name).where(sql`state <> 'closed' or deferred_until is not null`),
    ],
  );
}

/**
 * Rate limits set at run time (CLI, API, control route): at most `max_starts` job starts in any
 * `period_ms`, across every invocation; each overrides the rate the code declares for the same scope.
 * `queue`, `kind` — the queue's or kind's starts; `key` — each concurrency key of the queue `name`;
 * `destination` — the destination `name`, or `*`: each destination that has no rate of its own.
 */
export function rateLimitsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'rate_limits',
    {
      scope: text('scope').notNull(),
      name: text('name').notNull(),
      maxStarts: integer('max_starts').notNull(),
      periodMs: integer('period_ms').notNull(),
      setAt: timestamp('set_at', tz).notNull(),
      setBy: text('set_by').notNull(),
      reason: text('reason'),
    },
    (t) => [
      primaryKey({ columns: [t.scope, t.name] }),
      check('rate_limits_scope_check', sql`${t.scope} in ('queue', 'kind', 'key', 'destination')`),
      check('rate_limits_max_starts_check', sql`${t.maxStarts} >= 1`),
      check('rate_limits_period_check', sql`${t.periodMs} between 1000 and 86400000`),
    ],
  );
}

/**
 * The recent starts of each rate-limited scope (one concurrency key, one destination…): parallel
 * arrays of start times and how many jobs started then, kept for two periods. Written only under the
 * scope's advisory lock, by the claim that took the starts (rate_room and record_rate_starts,
 * migration 0015).
 */
export function rateBucketsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'rate_buckets',
    {
      scope: text('scope').notNull(),
      name: text('name').notNull(),
      key: text('key').notNull().default(''),
      starts: timestamp('starts', tz).array().notNull().default(sql`'{}'`),
      counts: integer('counts').array().notNull().default(sql`'{}'`),
      /** The period of the rate that last wrote it (what `skiplock rate-limits` counts over). */
      periodMs: integer('period_ms').notNull(),
      updatedAt: timestamp('updated_at', tz).notNull().defaultNow(),
    },
    (t) => [primaryKey({ columns: [t.scope, t.name, t.key] })],
  );
}

/**
 * Recurring schedules the code defines (defineSchedule): one row per schedule name, written by the
 * tick that first sees it and by each tick that enqueues an occurrence. `last_occurrence` is the
 * newest occurrence handled (enqueued or skipped as missed); a tick moves it forward with a
 * compare-and-set in the same statement as the enqueue, so concurrent ticks enqueue it once.
 */
export function schedulesTableIn(schema: PgSchema<string>) {
  return schema.table('schedules', {
    name: text('name').primaryKey(),
    cron: text('cron').notNull(),
    timezone: text('timezone').notNull(),
    kind: text('kind').notNull(),
    lastOccurrence: timestamp('last_occurrence', tz).notNull(),
    lastJobId: bigint('last_job_id', { mode: 'bigint' }),
    lastEnqueuedAt: timestamp('last_enqueued_at', tz),
    createdAt: timestamp('created_at', tz).notNull().defaultNow(),
    updatedAt: timestamp('updated_at', tz).notNull().defaultNow(),
  });
}

/**
 * Schedules the app creates at run time (createSchedule, applySchedules): data, not code. `key` is
 * the app's name for it (`digest:user-42`). `next_run_at` is the next occurrence not yet handled
 * (null when paused or past its end); the tick reads only the rows it makes due, through a partial
 * index, claims them with a short `claimed_until` lease, and moves `next_run_at` with a
 * compare-and-set on `version` (bumped by every edit, so an edit during a tick wins) in the
 * statement that enqueues their jobs.
 */
export function runtimeSchedulesTableIn(schema: PgSchema<string>) {
  return schema.table(
    'runtime_schedules',
    {
      key: text('key').primaryKey(),
      kind: text('kind').notNull(),
      cron: text('cron'),
      intervalMs: bigint('interval_ms', { mode: 'number' }),
      timezone: text('timezone').notNull().default('UTC'),
      payload: jsonb('payload').notNull(),
      queue: text('queue').notNull(),
      /** The stored job options: priority, max_attempts, deadline_ms, correlation, ordering, concurrency, destination. */
      jobOptions: jsonb('job_options').notNull(),
      startAt: timestamp('start_at', tz),
      endAt: timestamp('end_at', tz),
      /** 'last', 'skip' or a whole number as text (MissedPolicy). */
      missed: text('missed').notNull().default('last'),
      lateAfterMs: integer('late_after_ms').notNull().default(300000),
      setId: text('set_id'),
      pausedAt: timestamp('paused_at', tz),
      nextRunAt: timestamp('next_run_at', tz),
      claimedUntil: timestamp('claimed_until', tz),
      lastOccurrence: timestamp('last_occurrence', tz),
      lastEnqueuedAt: timestamp('last_enqueued_at', tz),
      version: bigint('version', { mode: 'number' }).notNull().default(1),
      createdAt: timestamp('created_at', tz).notNull().defaultNow(),
      updatedAt: timestamp('updated_at', tz).notNull().defaultNow(),
    },
    (t) => [
      index('runtime_schedules_due_idx').on(t.nextRunAt).where(sql`next_run_at is not null`),
      index('runtime_schedules_set_idx').on(t.setId, t.key).where(sql`set_id is not null`),
      check('runtime_schedules_pattern_check', sql`(cron is null) <> (interval_ms is null)`),
      check('runtime_schedules_interval_check', sql`interval_ms is null or interval_ms >= 1000`),
    ],
  );
}

/**
 * Sessions of the operator console: a row per login, found by the SHA-256 of the secret its cookie
 * holds (the secret itself is never stored). `token_id` names the admin token that opened it, so a
 * rotated token ends every session it opened; `csrf` is the token every form of the session carries.
 */
export function consoleSessionsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'console_sessions',
    {
      id: text('id').primaryKey(),
      who: text('who').notNull(),
      readOnly: boolean('read_only').notNull(),
      csrf: text('csrf').notNull(),
      tokenId: text('token_id').notNull(),
      client: text('client').notNull(),
      createdAt: timestamp('created_at', tz).notNull(),
      expiresAt: timestamp('expires_at', tz).notNull(),
    },
    (t) => [index('console_sessions_expires_idx').on(t.expiresAt)],
  );
}

/**
 * Failed console logins per client address (and `*` for all of them together) in the current
 * window: past the limit, logins from there are refused until `blocked_until`, whatever instance
 * of the function serves them.
 */
export function consoleLoginsTableIn(schema: PgSchema<string>) {
  return schema.table('console_logins', {
    client: text('client').primaryKey(),
    failures: integer('failures').notNull(),
    windowStartedAt: timestamp('window_started_at', tz).notNull(),
    blockedUntil: timestamp('blocked_until', tz),
  });
}

/**
 * Events (`publish`): one row per event published, written in the same statement as its subscribers'
 * jobs. `subscribers`: how many subscriptions were active for its name when it was published (or
 * were delivered it since, by a reconcile or a replay); 0 flags an event no one listens to. A retried
 * publish with the same dedupe key writes nothing. Maintenance prunes them after their retention.
 */
export function eventsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'events',
    {
      id: bigint('id', { mode: 'bigint' }).primaryKey().generatedByDefaultAsIdentity({ name: 'events_id_seq' }),
      name: text('name').notNull(),
      payload: jsonb('payload').notNull(),
      dedupeKey: text('dedupe_key'),
      publishedAt: timestamp('published_at', tz).notNull(),
      subscribers: integer('subscribers').notNull(),
    },
    (t) => [
      uniqueIndex('events_dedupe_idx').on(t.name, t.dedupeKey),
      index('events_name_published_idx').on(t.name, t.publishedAt),
      index('events_published_idx').on(t.publishedAt),
      check('events_subscribers_check', sql`${t.subscribers} >= 0`),
    ],
  );
}

/**
 * Who reacts to an event: one row per subscriber kind, written by `skiplock sync` at deploy and by
 * the workers of the kind (with their row in `workers`), so the function that publishes need not
 * import the functions that react. It holds what the publish statement needs to write the kind's
 * jobs: the filter (`where_json`, jsonb containment), the job options, and the payload paths of its
 * keys. A retired subscription keeps its row (`retired_at`); `active_since` is when it last became
 * active, from which a reconcile fills in the events a concurrent publish could not yet see it for.
 */
export function subscriptionsTableIn(schema: PgSchema<string>) {
  return schema.table(
    'subscriptions',
    {
      kind: text('kind').primaryKey(),
      event: text('event').notNull(),
      whereJson: jsonb('where_json'),
      queue: text('queue').notNull(),
      priority: smallint('priority').notNull(),
      maxAttempts: integer('max_attempts').notNull(),
      deadlineMs: bigint('deadline_ms', { mode: 'number' }),
      orderingPath: text('ordering_path').array(),
      orderingHold: boolean('ordering_hold').notNull().default(false),
      concurrencyPath: text('concurrency_path').array(),
      destinationPath: text('destination_path').array(),
      createdAt: timestamp('created_at', tz).notNull(),
      updatedAt: timestamp('updated_at', tz).notNull(),
      activeSince: timestamp('active_since', tz).notNull(),
      retiredAt: timestamp('retired_at', tz),
    },
    (t) => [
      index('subscriptions_event_idx').on(t.event).where(sql`retired_at is null`),
      check('subscriptions_priority_check', sql`${t.priority} between -1000 and 1000`),
    ],
  );
}

/**
 * Which subscriber was given which event: one row per event and subscription, written with the job
 * (`job_id`). Its key makes a replay, a reconcile
 * and a publish create a subscriber's job for an event at most once, whichever runs first.
 */
export function eventDeliveriesTableIn(schema: PgSchema<string>, events: ReturnType<typeof eventsTableIn>) {
  return schema.table(
    'event_deliveries',
    {
      eventId: bigint('event_id', { mode: 'bigint' })
        .notNull()
        .references(() => events.id, { onDelete: 'cascade' }),
      subscription: text('subscription').notNull(),
      jobId: bigint('job_id', { mode: 'bigint' }),
      deliveredAt: timestamp('delivered_at', tz).notNull(),
    },
    (t) => [
      primaryKey({ name: 'event_deliveries_pk', columns: [t.eventId, t.subscription] }),
      index('event_deliveries_job_idx').on(t.jobId),
    ],
  );
}

/** The default `skiplock` schema, for drizzle-kit and for apps that import the tables. */
export const skiplockSchema = pgSchema('skiplock');
export const jobs = jobsTableIn(skiplockSchema);
export const completedCounts = completedCountsTableIn(skiplockSchema);
export const activityRollups = activityRollupsTableIn(skiplockSchema);
export const invocations = invocationsTableIn(skiplockSchema);
export const jobSteps = jobStepsTableIn(skiplockSchema);
export const signals = signalsTableIn(skiplockSchema);
export const workers = workersTableIn(skiplockSchema);
export const pauses = pausesTableIn(skiplockSchema);
export const limits = limitsTableIn(skiplockSchema);
export const destinations = destinationsTableIn(skiplockSchema);
export const rateLimits = rateLimitsTableIn(skiplockSchema);
export const rateBuckets = rateBucketsTableIn(skiplockSchema);
export const schedules = schedulesTableIn(skiplockSchema);
export const runtimeSchedules = runtimeSchedulesTableIn(skiplockSchema);
export const consoleSessions = consoleSessionsTableIn(skiplockSchema);
export const consoleLogins = consoleLoginsTableIn(skiplockSchema);
export const events = eventsTableIn(skiplockSchema);
export const subscriptions = subscriptionsTableIn(skiplockSchema);
export const eventDeliveries = eventDeliveriesTableIn(skiplockSchema, events);

export type JobsTable = ReturnType<typeof jobsTableIn>;

const tablesBySchema = new Map<string, JobsTable>([['skiplock', jobs]]);

/** The jobs table in `schemaName` (already validated by the caller). */
export function jobsTableFor(schemaName: string): JobsTable {
  let table = tablesBySchema.get(schemaName);
  if (!table) {
    table = jobsTableIn(pgSchema(schemaName));
    tablesBySchema.set(schemaName, table);
  }
  return table;
}
