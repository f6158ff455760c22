import type { DeclaredLimit, DeclaredRateLimit, DeclaredWindow } from '../../base/controls.js';
import { ConfigError } from '../../base/errors.js';
import type { Completion } from '../../base/outcomes.js';
import {
  type AnyPgDatabase,
  type DrizzleFactory,
  hasDrizzleDatabase,
  type SkiplockConnection,
} from '../../db/connection-options.js';
import type { Clock } from '../clock.js';
import type { BreakerSettings } from '../destinations.js';
import type { JobDefinition, JobHandler } from '../jobs.js';
import type { Logger } from '../logger.js';
import type { JobMetrics } from '../metrics.js';
import type { ScheduleDefinition } from '../schedules.js';
import type { Tracing } from '../tracing.js';
import type { InvocationStarter } from './admission.js';
import type { StepTimings } from './steps.js';

/** A kind this worker runs: its definition and the handler it was given. */
export interface Kind {
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  definition: JobDefinition<any, any>;
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  handler: JobHandler<any, any>;
}

/** The worker's options, checked and with their defaults: what every part of an invocation reads. */
export interface WorkerSettings {
  readonly db: SkiplockConnection;
  readonly schema: string;
  readonly queues: readonly string[] | undefined;
  readonly concurrency: number;
  readonly batchSize: number;
  readonly safetyMarginMs: number;
  readonly leaseGraceMs: number;
  readonly drain: boolean;
  readonly flushIntervalMs: number;
  readonly completion: Completion;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The time the statements use instead of the database's clock (tests only: `test.now`); undefined in production. */
  readonly databaseNow: (() => Date) | undefined;
  /** Whether info lines are written at all: building a line per completed job costs more than a no-op job. */
  readonly infoLogs: boolean;
  readonly kinds: ReadonlyMap<string, Kind>;
  /** The name this worker's invocations are registered under (the cap counts per name). */
  readonly name: string;
  /** At most this many invocations at once; undefined: not counted. */
  readonly maxInvocations: number | undefined;
  readonly fanOut: InvocationStarter | undefined;
  readonly fanOutTargetMs: number;
  /** Keep looking this long after the queue ran dry, every lingerPollMs; 0: return at once. */
  readonly lingerMs: number;
  readonly lingerPollMs: number;
  /** The same kinds, as a list (looked through on every turn of the loop). */
  readonly kindList: readonly Kind[];
  /** The concurrency limits the kinds and their queue definitions declare. */
  readonly limits: readonly DeclaredLimit[];
  /** The rate limits the kinds, their queue definitions and the worker (per destination) declare. */
  readonly rateLimits: readonly DeclaredRateLimit[];
  /** How long an invocation waits for a rate's next token rather than return (see WorkerOptions). */
  readonly rateWaitMs: number;
  /** The largest handler result stored, in bytes of JSON. */
  readonly maxResultBytes: number;
  /** The run windows the kinds and their queue definitions declare. */
  readonly windows: readonly DeclaredWindow[];
  /** The schedules this worker ticks, and how often at most (per warm instance). */
  readonly schedules: readonly ScheduleDefinition[];
  readonly scheduleTickMs: number;
  /** Tick run-time schedules (when the sweep says one is due). */
  readonly runtimeSchedules: boolean;
  /** An idle invocation reads when something is next due (the summary's nextDueAt). */
  readonly nextDue: boolean;
  /**
   * Kinds not to report as never fitting (kinds_never_fit): those already reported by this instance,
   * and those of its slowQueues, which another worker runs.
   */
  readonly unfitWarned: Set<string>;
  /** When this instance last recorded what it serves in `workers` (on its clock). */
  readonly served: { lastAt: number | undefined };
  /** When this instance last ticked its schedules (on its clock). */
  readonly scheduleTick: { lastAt: number | undefined };
  /** Breaker settings by destination (the worker's `breakers`), over the kind's. */
  readonly breakers: ReadonlyMap<string, Partial<BreakerSettings>>;
  /**
   * What the last claim said of the next (`flow`): a warm instance's next invocation starts with
   * the claim shape its last one ended with. The only state shared between invocations.
   */
  readonly claimShape: { limited: boolean; ordered: boolean; rated: boolean };
  /**
   * What the last sweep said (`ordered`: a job with an ordering key is unfinished): the sweep with the
   * release of ordering keys is sent only then (sweepDoomed's `ordering`).
   */
  readonly sweepShape: { ordered: boolean };
  /** The durations of the durable steps this warm instance ran (the time-left check reads their p95). */
  readonly stepTimings: StepTimings;
  /** Counters and durations (the worker's `metrics`), or undefined. */
  readonly metrics: JobMetrics | undefined;
  /** Spans for claims and attempts (the worker's `tracing`), or undefined. */
  readonly tracing: Tracing | undefined;
  /** Makes handlers' Drizzle transactions over a pool that has no Drizzle database (the worker's `drizzle`). */
  readonly drizzle: DrizzleFactory | undefined;
}

/**
 * The `now` a statement of this worker passes down: the test's time when one is supplied, else
 * undefined (the statement reads the database's clock).
 */
export function statementNow(settings: Pick<WorkerSettings, 'databaseNow'>): Date | undefined {
  const now = settings.databaseNow?.();
  if (now !== undefined && !(now instanceof Date && Number.isFinite(now.getTime()))) {
    throw new ConfigError('test.now must return a valid Date');
  }
  return now;
}

/** Why a handler's transaction cannot be made: the pool has no Drizzle database and none was given. */
export const NEEDS_DRIZZLE =
  "the deployed functions' pg pool has no Drizzle database: pass `drizzle` (from 'drizzle-orm/node-postgres') to the worker (createLambdaWorker, createVercelWorker or createWorker)";

/**
 * Runs `work` in the transaction a handler gets (a transactional kind's `ctx.tx`, a transactional
 * step's `tx`): a Drizzle transaction, from `db.transaction()` or, on a pool without a Drizzle
 * database, from the worker's `drizzle` over one of its connections. Undefined when neither can.
 */
export function handlerTransaction(
  settings: Pick<WorkerSettings, 'db' | 'drizzle'>,
): (<T>(work: (tx: AnyPgDatabase) => Promise<T>) => Promise<T>) | undefined {
  const { db, drizzle } = settings;
  if (hasDrizzleDatabase(db)) return (work) => db.db.transaction(work);
  const make = db.drizzleTransaction;
  return make && drizzle ? (work) => make(drizzle, work) : undefined;
}
