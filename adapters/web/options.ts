import type { InvocationStarter } from '../../base/starter.js';
import type { Clock } from '../../core/clock.js';
import type { JobDefinition } from '../../core/jobs.js';
import type { JobMetrics } from '../../core/metrics.js';
import type { Nudger } from '../../core/nudge.js';
import type { ScheduleDefinition } from '../../core/schedules.js';
import type { Tracing } from '../../core/tracing.js';
import type { DrizzleFactory } from '../../db/connection-options.js';

/** The options every platform's functions share, written once; each adapter adds its own. */

export type Env = Record<string, string | undefined>;
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export type Kinds = readonly JobDefinition<any, any>[];

/** A deployed worker's options on every platform (Lambda's and Vercel's add their own). */
export interface WorkerChoices {
  /** @defaultValue process.env */
  env?: Env;
  /**
   * Only these queues, e.g. a worker for slow reports; wins over SKIPLOCK_QUEUES (a platform whose
   * variables are project-wide names a worker's queues here). @defaultValue SKIPLOCK_QUEUES, else all
   */
  queues?: readonly string[];
  /**
   * Queues another worker route with a longer budget also serves (the template's `reports`): a kind
   * of these queues whose timeoutMs does not fit this route's invocations is left to that route —
   * not refused as the route is made, never claimed here, not logged as `kinds_never_fit` — while
   * their kinds that fit run here too. @defaultValue none: every kind of the route's queues must fit
   */
  slowQueues?: readonly string[];
  /** Only these kinds; wins over SKIPLOCK_KINDS. @defaultValue SKIPLOCK_KINDS, else all of `jobs` */
  kinds?: readonly string[];
  /** The invocation's clock (tests). @defaultValue the system clock */
  clock?: Clock;
  /**
   * How more invocations start when SKIPLOCK_MAX_INVOCATIONS is set and the backlog needs them:
   * `false` turns fan-out off (the cap still holds). @defaultValue the platform's own: asynchronous
   * Invokes of this function on Lambda (its name from the Lambda context); requests of this route
   * (bearer CRON_SECRET) at SKIPLOCK_BASE_URL, else at the origin the request came to, on Vercel
   */
  fanOut?: InvocationStarter | false;
  /**
   * Recurring schedules (defineSchedule) this worker ticks as each invocation starts — the
   * scheduler's minute tick drives them, no extra cron needed. @defaultValue none
   */
  schedules?: readonly ScheduleDefinition[];
  /**
   * Spans for each claim and attempt, linked to the enqueue's (OpenTelemetry: `otelTracing()` from
   * `skiplock/otel`). @defaultValue none
   */
  tracing?: Tracing;
  /**
   * Counters and durations of attempts, rate waits, breakers and invocations (OpenTelemetry:
   * `otelMetrics()` from `skiplock/otel`). @defaultValue none
   */
  metrics?: JobMetrics;
  /**
   * Makes the Drizzle transaction a transactional kind's handler (`ctx.tx`) or a transactional step
   * gets: `drizzle` from 'drizzle-orm/node-postgres', or `({ client }) => drizzle({ client, schema })`.
   * Needed on pg only for those: the function's pool runs skiplock's statements without a Drizzle
   * database, which keeps Drizzle's query builders out of the bundle. @defaultValue none
   */
  drizzle?: DrizzleFactory;
  /**
   * Tests only: the time the database judges the worker's claims at (WorkerOptions.test.now), also
   * the wall time its idle checks and wake-ups use — a simulated day runs in milliseconds.
   * @defaultValue the system's and the database's clocks
   */
  test?: { now?: () => Date };
}

/** The options of a function that writes and then starts the workers (enqueue, replay, signal). */
export interface NudgeChoices {
  /** @defaultValue process.env */
  env?: Env;
  /**
   * Starts the workers of the queues written to, after each write. @defaultValue the platform's:
   * asynchronous Invokes of the functions SKIPLOCK_NUDGE_FUNCTIONS names on Lambda; requests of the
   * worker routes SKIPLOCK_NUDGE_ROUTES names (bearer CRON_SECRET) on Vercel; none when unset
   */
  nudger?: Nudger;
  /** The nudges' clock (tests: the coalescing window). @defaultValue the system clock */
  clock?: Clock;
}
