import { ConfigError } from '../../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../../base/identifiers.js';
import type { Completion } from '../../base/outcomes.js';
import type { DrizzleFactory, SkiplockConnection } from '../../db/connect.js';
import type { BatchHandler } from '../batches.js';
import { type Clock, systemClock } from '../clock.js';
import { type BreakerSettings, breakerSettings, MAX_DESTINATION_LENGTH } from '../destinations.js';
import { declaredLimits, declaredRateLimits, declaredWindows, type JobDefinition, type JobHandler } from '../jobs.js';
import { jsonLogger, type Logger } from '../logger.js';
import type { JobMetrics } from '../metrics.js';
import { type DeclaredRateLimit, type RateLimit, rateLimitOption } from '../rate-limits.js';
import type { ScheduleDefinition } from '../schedules.js';
import type { Tracing } from '../tracing.js';
import type { InvocationStarter } from './admission.js';
import { assertKindsFit } from './deadline.js';
import { Invocation } from './invocation.js';
import { type Kind, NEEDS_DRIZZLE, type WorkerSettings } from './settings.js';
import { StepTimings } from './steps.js';
import type { InvocationInput, InvocationSummary } from './summary.js';

export interface WorkerOptions {
  db: SkiplockConnection;
  /** The kinds this worker runs. Each needs a handler, here or in `handlers`. */
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs: readonly JobDefinition<any, any>[];
  /** Handlers by kind, for kinds defined without one (e.g. shared definitions); a batch kind's takes a batch. */
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  handlers?: Record<string, JobHandler<any, any> | BatchHandler<any>>;
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Only claim jobs in these queues. @defaultValue all queues */
  queues?: readonly string[];
  /**
   * Queues that another worker with a longer budget also serves (a route for slow reports): a kind
   * of these queues whose timeoutMs does not fit this worker's invocations is left to that worker —
   * never claimed here, not refused by `invocationMs`, not logged as `kinds_never_fit` — while their
   * kinds that fit run here too. @defaultValue none: every kind of the worker's queues must fit
   */
  slowQueues?: readonly string[];
  /** Handlers running at once. @defaultValue 10 */
  concurrency?: number;
  /**
   * Jobs claimed per statement, at most. Up to `concurrency`, a claim takes no more than the free
   * slots; above it, the extra jobs wait locally and are released if time runs out.
   * @defaultValue concurrency
   */
  batchSize?: number;
  /** Stop claiming this long before the deadline; the time left is for writing outcomes. @defaultValue 1000 */
  safetyMarginMs?: number;
  /**
   * How long this worker's invocations run (the function's timeout: Lambda's `timeout`, Vercel's
   * `maxDuration`), when known as the worker is made: a kind of one of its queues whose timeoutMs +
   * safetyMarginMs exceeds it would never be claimed, and is refused here with a ConfigError. Unset,
   * each invocation checks its kinds against its own `remainingMs` (the summary's `unfit`, and
   * `stoppedBecause: 'no_kind_fits'` when none fits). @defaultValue unset
   */
  invocationMs?: number;
  /** Lease = the kind's timeout + this grace. @defaultValue 5000 */
  leaseGraceMs?: number;
  /** Keep claiming while work remains and time allows; false = one batch per invocation. @defaultValue true */
  drain?: boolean;
  /**
   * What completing a job does to its row. `keep`: it stays (state completed) until retention
   * prunes it, for `jobs show` and per-job history. `delete`: it is deleted as the job completes
   * — the least work and WAL per job, as graphile-worker does; the stats count completions per
   * minute instead. Jobs holding a `window` dedupe key are kept either way.
   * @defaultValue 'keep'
   */
  completedJobs?: Completion;
  /** Buffered outcomes are written at least this often. @defaultValue 200 */
  flushIntervalMs?: number;
  /** @defaultValue jsonLogger() */
  logger?: Logger;
  /** @defaultValue the system clock */
  clock?: Clock;
  /**
   * At most this many invocations of this worker (by `name`) run at once, counted in the database
   * with registrations that expire on their own. An invocation that finds them all running returns
   * at once (`stoppedBecause: 'saturated'`). @defaultValue unset: invocations are not counted
   */
  maxInvocations?: number;
  /** What the invocations are counted under, e.g. the function's name. @defaultValue 'worker' */
  name?: string;
  /**
   * Starts more invocations of this worker when the ready backlog needs them (needs
   * `maxInvocations`, which it never exceeds). @defaultValue none: no fan-out
   */
  fanOut?: InvocationStarter;
  /**
   * Fan out until the ready backlog could drain within this long at the rate each invocation
   * measured (or within the time left, when less). @defaultValue 5000
   */
  fanOutTargetMs?: number;
  /**
   * After the queue runs dry, keep looking for this long (a claim every `lingerPollMs`) before
   * returning: work enqueued meanwhile starts without a nudge or a tick, at the price of function
   * time. With nudges it buys little (docs/performance.md has the figures). @defaultValue 0
   */
  lingerMs?: number;
  /** How often a lingering invocation looks. @defaultValue 250 */
  lingerPollMs?: number;
  /**
   * Breaker settings per destination, over those of the job's kind (its `breaker` option), e.g.
   * `{ 'api.partner.example': { failures: 3, coolDownMs: 120_000 } }`. @defaultValue none
   */
  breakers?: Record<string, Partial<BreakerSettings>>;
  /**
   * Rate limits per destination: at most `limit` starts of jobs for it in any `periodMs`, across
   * every invocation, e.g. `{ 'api.partner.example': { limit: 10, periodMs: 1000 } }`; `'*'` sets one
   * for each destination without its own. `skiplock rate-limits set destination …` overrides them
   * at run time. @defaultValue none
   */
  destinationRateLimits?: Record<string, RateLimit>;
  /**
   * When a rate limit is all that holds its work back, an invocation waits for the rate's next
   * token if it comes within this long (and before the invocation must stop claiming), instead of
   * returning drained. 0: never waits. @defaultValue 10000
   */
  rateWaitMs?: number;
  /**
   * The largest result a handler may return, in bytes of JSON: a larger one (or one that is not
   * JSON) sends the job to the DLQ with reason `invalid_result`. @defaultValue 65536
   */
  maxResultBytes?: number;
  /**
   * Recurring schedules (defineSchedule) this worker runs: an invocation starts with a tick that
   * enqueues their due occurrences, at most once per `scheduleTickMs` in a warm instance; the
   * scheduler's minute tick and every nudged invocation drive it. @defaultValue none
   */
  schedules?: readonly ScheduleDefinition[];
  /** The least time between two schedule ticks of one warm instance. @defaultValue 10000 */
  scheduleTickMs?: number;
  /**
   * Tick the schedules the app created at run time (createSchedule, applySchedules), of any kind:
   * the invocation's first statement also tells whether one is due, and only then does it claim
   * and enqueue them (two statements per 1000 due schedules). @defaultValue true
   */
  runtimeSchedules?: boolean;
  /**
   * An invocation that found nothing to run reads, in one more statement, when this worker next has
   * something to do (a job's run_at, a retry's back-off, a sleep's end, a signal's timeout, a lease
   * that may need a rescue, a schedule's next occurrence) and returns it as the summary's
   * `nextDueAt`: the platform adapters wake the worker then instead of on every tick.
   * @defaultValue false
   */
  nextDue?: boolean;
  /**
   * Spans for each claim and each attempt, linked to the enqueue's: `otelTracing()` from
   * `skiplock/otel` (OpenTelemetry), or your own Tracing. @defaultValue none
   */
  tracing?: Tracing;
  /**
   * Counters and durations of attempts, rate waits, breakers and invocations: `otelMetrics()` from
   * `skiplock/otel` (OpenTelemetry), or your own JobMetrics. @defaultValue none
   */
  metrics?: JobMetrics;
  /**
   * Makes the Drizzle transactions handed to transactional kinds (`ctx.tx`) and transactional steps,
   * when `db` is the deployed functions' pg pool, which runs without a Drizzle database to keep the
   * bundle small: `drizzle` from 'drizzle-orm/node-postgres', or `({ client }) => drizzle({ client,
   * schema })`. With `connect()`'s database it is not needed. @defaultValue none
   */
  drizzle?: DrizzleFactory;
  /**
   * For tests only (`runJobs({ time })` in `skiplock/testing` sets it). `now`: the time every
   * statement of this worker compares with and writes instead of the database's clock — the claim
   * (run_at, leases, deadlines, windows, rates), outcomes and back-offs, and the steps' sleeps,
   * waits and their timeouts — read once per statement. Production leaves it unset: the database's
   * clock is the only one. @defaultValue unset
   */
  test?: { now?: () => Date };
}

export const WORKER_DEFAULTS = {
  concurrency: 10,
  safetyMarginMs: 1_000,
  leaseGraceMs: 5_000,
  drain: true,
  flushIntervalMs: 200,
  completedJobs: 'keep',
  name: 'worker',
  fanOutTargetMs: 5_000,
  lingerMs: 0,
  lingerPollMs: 250,
  rateWaitMs: 10_000,
  maxResultBytes: 65_536,
  scheduleTickMs: 10_000,
} as const;

export interface Worker {
  runInvocation(input: InvocationInput): Promise<InvocationSummary>;
}

/** Builds the invocation loop for a set of kinds. It knows nothing of Lambda or Vercel. */
export function createWorker(options: WorkerOptions): Worker {
  const settings = workerSettings(options);
  return { runInvocation: (input) => new Invocation(settings, input).run() };
}

/** Checks the options and applies the defaults; throws a ConfigError naming the first problem. */
function workerSettings(options: WorkerOptions): WorkerSettings {
  const { db } = options;
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const concurrency = options.concurrency ?? WORKER_DEFAULTS.concurrency;
  const batchSize = options.batchSize ?? concurrency;
  const safetyMarginMs = options.safetyMarginMs ?? WORKER_DEFAULTS.safetyMarginMs;
  const leaseGraceMs = options.leaseGraceMs ?? WORKER_DEFAULTS.leaseGraceMs;
  const completion = options.completedJobs ?? WORKER_DEFAULTS.completedJobs;
  if (completion !== 'keep' && completion !== 'delete') {
    throw new ConfigError("completedJobs must be 'keep' or 'delete'");
  }
  const queues = options.queues?.map((q) => assertLabel('queue', q));
  const slowQueues = (options.slowQueues ?? []).map((q) => assertLabel('queue', q));
  for (const [name, value] of [
    ['concurrency', concurrency],
    ['batchSize', batchSize],
  ] as const) {
    if (!Number.isInteger(value) || value < 1 || value > 1000) {
      throw new ConfigError(`${name} must be an integer from 1 to 1000`);
    }
  }
  if (!(safetyMarginMs >= 0) || !(leaseGraceMs >= 0)) {
    throw new ConfigError('safetyMarginMs and leaseGraceMs must be >= 0');
  }

  const { invocationMs } = options;
  if (invocationMs !== undefined) {
    if (!(Number.isInteger(invocationMs) && invocationMs >= 1 && invocationMs <= 86_400_000)) {
      throw new ConfigError('invocationMs must be a whole number of ms from 1 to 86400000');
    }
    assertKindsFit(options.jobs, { invocationMs, safetyMarginMs, queues, slowQueues });
  }

  const kinds = new Map<string, Kind>();
  for (const definition of options.jobs) {
    const handler = (options.handlers?.[definition.kind] ?? definition.handler ?? definition.batch?.handler) as
      | Kind['handler']
      | undefined;
    if (!handler) throw new ConfigError(`job kind ${definition.kind} has no handler`);
    if (typeof handler !== 'function')
      throw new ConfigError(`job kind ${definition.kind}: its handler is not a function`);
    if (definition.transactional && !db.interactiveTransactions) {
      throw new ConfigError(
        `job kind ${definition.kind} is transactional, but the ${db.driver} driver has no interactive transactions; use pg or neon-ws`,
      );
    }
    if (definition.transactional && db.drizzleTransaction && !options.drizzle) {
      throw new ConfigError(`job kind ${definition.kind} is transactional: ${NEEDS_DRIZZLE}`);
    }
    kinds.set(definition.kind, { definition, handler });
  }
  if (kinds.size === 0) throw new ConfigError('a worker needs at least one job kind');

  const name = assertLabel('worker name', options.name ?? WORKER_DEFAULTS.name);
  const { maxInvocations, fanOut } = options;
  if (
    maxInvocations !== undefined &&
    !(Number.isInteger(maxInvocations) && maxInvocations >= 1 && maxInvocations <= 1000)
  ) {
    throw new ConfigError('maxInvocations must be an integer from 1 to 1000');
  }
  if (fanOut && maxInvocations === undefined) {
    throw new ConfigError('fanOut needs maxInvocations: fan-out never starts more invocations than that cap');
  }
  const fanOutTargetMs = options.fanOutTargetMs ?? WORKER_DEFAULTS.fanOutTargetMs;
  if (!(fanOutTargetMs > 0)) throw new ConfigError('fanOutTargetMs must be > 0');
  const lingerMs = options.lingerMs ?? WORKER_DEFAULTS.lingerMs;
  const lingerPollMs = options.lingerPollMs ?? WORKER_DEFAULTS.lingerPollMs;
  if (!(lingerMs >= 0 && lingerMs <= 900_000)) throw new ConfigError('lingerMs must be from 0 to 900000');
  if (!(lingerPollMs >= 10 && lingerPollMs <= 60_000)) throw new ConfigError('lingerPollMs must be from 10 to 60000');
  const maxResultBytes = options.maxResultBytes ?? WORKER_DEFAULTS.maxResultBytes;
  if (!(Number.isInteger(maxResultBytes) && maxResultBytes >= 2 && maxResultBytes <= 10 * 1024 * 1024)) {
    throw new ConfigError('maxResultBytes must be a whole number from 2 to 10485760');
  }
  const schedules = options.schedules ?? [];
  const names = new Set<string>();
  for (const s of schedules) {
    if (!s || typeof s.name !== 'string' || typeof s.next !== 'function') {
      throw new ConfigError('schedules must be made with defineSchedule()');
    }
    if (names.has(s.name)) throw new ConfigError(`two schedules are named ${s.name}`);
    names.add(s.name);
  }
  const scheduleTickMs = options.scheduleTickMs ?? WORKER_DEFAULTS.scheduleTickMs;
  if (!(Number.isInteger(scheduleTickMs) && scheduleTickMs >= 0 && scheduleTickMs <= 3_600_000)) {
    throw new ConfigError('scheduleTickMs must be a whole number from 0 to 3600000');
  }
  const rateWaitMs = options.rateWaitMs ?? WORKER_DEFAULTS.rateWaitMs;
  if (!(Number.isInteger(rateWaitMs) && rateWaitMs >= 0 && rateWaitMs <= 900_000)) {
    throw new ConfigError('rateWaitMs must be a whole number from 0 to 900000');
  }

  const databaseNow = options.test?.now;
  if (databaseNow !== undefined && typeof databaseNow !== 'function') {
    throw new ConfigError('test.now must be a function that returns a Date');
  }

  const logger = options.logger ?? jsonLogger();
  return {
    db,
    schema,
    queues,
    concurrency,
    batchSize,
    safetyMarginMs,
    leaseGraceMs,
    drain: options.drain ?? WORKER_DEFAULTS.drain,
    flushIntervalMs: options.flushIntervalMs ?? WORKER_DEFAULTS.flushIntervalMs,
    completion,
    logger,
    clock: options.clock ?? systemClock,
    databaseNow,
    // Building a log line per completed job costs more than a no-op job: skip it when nobody listens.
    infoLogs: logger.isEnabled?.('info') ?? true,
    kinds,
    kindList: [...kinds.values()],
    limits: declaredLimits(options.jobs),
    rateLimits: [...declaredRateLimits(options.jobs), ...destinationRates(options.destinationRateLimits)],
    rateWaitMs,
    maxResultBytes,
    windows: declaredWindows(options.jobs),
    schedules,
    scheduleTickMs,
    runtimeSchedules: options.runtimeSchedules ?? true,
    nextDue: options.nextDue ?? false,
    tracing: options.tracing,
    drizzle: options.drizzle,
    metrics: options.metrics,
    scheduleTick: tickStateOf(schedules),
    breakers: breakerOverrides(options.breakers),
    claimShape: { limited: false, ordered: false, rated: false },
    sweepShape: { ordered: false },
    stepTimings: new StepTimings(),
    served: { lastAt: undefined },
    unfitWarned: new Set(options.jobs.filter((d) => slowQueues.includes(d.queue)).map((d) => d.kind)),
    name,
    maxInvocations,
    fanOut,
    fanOutTargetMs,
    lingerMs,
    lingerPollMs,
  };
}

export type { InvocationStarter } from './admission.js';
export type { InvocationInput, InvocationSummary } from './summary.js';

// When each set of schedules last ticked in this process: a deployed function builds a worker per
// invocation, and a warm instance must still tick at most once per scheduleTickMs.
const tickStates = new WeakMap<readonly ScheduleDefinition[], { lastAt: number | undefined }>();
function tickStateOf(schedules: readonly ScheduleDefinition[]): { lastAt: number | undefined } {
  let state = tickStates.get(schedules);
  if (!state) {
    state = { lastAt: undefined };
    tickStates.set(schedules, state);
  }
  return state;
}

/** The worker's per-destination rates, each checked. */
function destinationRates(given: WorkerOptions['destinationRateLimits']): DeclaredRateLimit[] {
  if (given === undefined) return [];
  if (given === null || typeof given !== 'object') {
    throw new ConfigError('destinationRateLimits must be an object by destination');
  }
  return Object.entries(given).map(([destination, rate]) => {
    const where = `destinationRateLimits[${JSON.stringify(destination.slice(0, 80))}]`;
    if (destination.length === 0 || destination.length > MAX_DESTINATION_LENGTH) {
      throw new ConfigError(`${where}: a destination is 1-${MAX_DESTINATION_LENGTH} characters`);
    }
    return { scope: 'destination', name: destination, ...(rateLimitOption(where, 'rate', rate ?? null) as Rate) };
  });
}
type Rate = { maxStarts: number; periodMs: number };

/** The worker's per-destination breaker settings, each checked (with the defaults filled in). */
function breakerOverrides(given: WorkerOptions['breakers']): ReadonlyMap<string, Partial<BreakerSettings>> {
  const overrides = new Map<string, Partial<BreakerSettings>>();
  if (given === undefined) return overrides;
  if (given === null || typeof given !== 'object') throw new ConfigError('breakers must be an object by destination');
  for (const [destination, settings] of Object.entries(given)) {
    breakerSettings(settings, `breakers[${JSON.stringify(destination.slice(0, 80))}]`);
    overrides.set(destination, settings);
  }
  return overrides;
}
