import type { DeclaredLimit, DeclaredRateLimit } from '../base/controls.js';
import { ConfigError, UnknownKindError } from '../base/errors.js';
import { assertLabel } from '../base/identifiers.js';
import type { ParentJob } from '../base/rows.js';
import type { AnyPgDatabase } from '../db/connect.js';
import { type BackoffFn, type BackoffOption, toBackoff } from './backoff.js';
import type { BatchSpec } from './batches.js';
import { type BreakerSettings, breakerSettings } from './destinations.js';
import type { EnqueueOptions } from './enqueue-options.js';
import type { PayloadInput, PayloadOutput, PayloadSchema } from './issues.js';
import type { Logger } from './logger.js';
import { type RateLimit, rateLimitOption } from './rate-limits.js';
import { type DeclaredWindow, type RunWindow, runWindowOption, type WindowSpec } from './run-windows.js';

/** What a handler gets besides its payload. */
export interface JobContext {
  id: string;
  kind: string;
  queue: string;
  /** 1 on the first attempt. */
  attempt: number;
  maxAttempts: number;
  correlationId: string | null;
  /**
   * This attempt's lease token. Pass it to external systems that accept fencing tokens: a
   * write carrying an older token than one already seen can then be refused there too.
   */
  leaseToken: string;
  /** Fires at the job's timeout, at the invocation's deadline, or when the lease is lost. */
  signal: AbortSignal;
  logger: Logger;
  /** Records progress (any JSON). Fenced: returns false when this holder lost the lease. */
  reportProgress(progress: unknown): Promise<boolean>;
  /**
   * The progress last reported for this job — by an earlier attempt (a retry, a rescue after the
   * lease ran out) or by this one — or null: a job built in steps resumes where it stopped.
   */
  readonly lastProgress: unknown;
  /** Pushes the lease expiry to at least `ms` from now. Fenced like reportProgress. */
  extendLease(ms: number): Promise<boolean>;
  /**
   * The jobs this one waited for (enqueue `after`), in the order it named them, each with its state
   * and its handler's result; empty for a job without parents. One query per call.
   */
  parents(): Promise<ParentJob[]>;
  /**
   * A durable step: runs `fn` once for this job and stores its JSON result under the job; a retry,
   * a rescue or a later invocation that reaches the step again gets the stored result without
   * running it. A step that throws is retried on its own attempts (the job's are not used); one
   * that would not fit the invocation's time left moves the job to a fresh invocation first.
   * Names are unique within a job, and the job must reach its steps in the same order every run.
   */
  step<T>(name: string, fn: () => T, options?: StepOptions): Promise<Awaited<T>>;
  /**
   * A transactional step (pg, neon-ws): `fn`'s writes through `tx` and the step's stored result
   * commit in one transaction, fenced on the job's lease — they happen exactly once.
   */
  step<T>(name: string, options: TransactionalStepOptions, fn: (tx: AnyPgDatabase) => Promise<T>): Promise<T>;
  /** A durable sleep: the job leaves the invocation and runs again `ms` later (database clock); no attempt used. */
  sleep(name: string, ms: number): Promise<void>;
  /** A durable sleep until `at` (database clock). */
  sleepUntil(name: string, at: Date): Promise<void>;
  /**
   * Waits for a signal on `key` (`signal(db, key, payload)`), at most `timeoutMs`: the signal's
   * payload, or `{ timedOut: true }`. A signal sent before the wait began is not lost; each signal is
   * taken by one wait. While it waits the job is back in the queue: no attempt, no function time.
   */
  waitForSignal<T = unknown>(
    name: string,
    options: { key: string; timeoutMs: number },
  ): Promise<{ timedOut: false; payload: T } | { timedOut: true }>;
}

/** How one durable step runs. Every option falls back to the job's kind. */
export interface StepOptions {
  /** Attempts of this step before the job goes to the DLQ (`step_failed`). @defaultValue the kind's maxAttempts */
  maxAttempts?: number;
  /** The wait before a failed step runs again. @defaultValue the kind's backoff */
  backoff?: BackoffOption;
  /**
   * The step's own timeout. It also decides whether the step still fits the invocation's time left
   * (without one, the p95 of the step's recorded durations does, then the kind's timeoutMs).
   * @defaultValue the kind's timeoutMs
   */
  timeoutMs?: number;
}

/** A transactional step: its writes and its stored result commit together (pg and neon-ws). */
export interface TransactionalStepOptions extends StepOptions {
  transaction: true;
}

/** In transactional mode the handler also gets the transaction its completion commits in. */
export interface TransactionalJobContext extends JobContext {
  tx: AnyPgDatabase;
}

export type JobHandler<P, Tx extends boolean = false> = (
  payload: P,
  context: Tx extends true ? TransactionalJobContext : JobContext,
) => unknown;

export interface JobKindOptions<S extends PayloadSchema, Tx extends boolean = false> {
  /** Unique name of the kind, stored in every job row. */
  kind: string;
  /** zod schema of the payload; enqueue validates against it before inserting. */
  payload: S;
  /** Its queue: a name, or a definition that also declares the queue's limits. @defaultValue 'default' */
  queue?: string | QueueDefinition;
  /** Lower runs first, -1000..1000. @defaultValue 0 */
  priority?: number;
  /** Attempts before the job goes to the DLQ with reason `max_attempts`. @defaultValue 25 */
  maxAttempts?: number;
  /** How long one attempt may run; its signal aborts then. Also sizes the lease. @defaultValue 30000 */
  timeoutMs?: number;
  /** Delay before a retry. @defaultValue exponential, 1 s base, ×2, 1 h cap, 25% jitter */
  backoff?: BackoffOption;
  /** Run the handler inside a transaction that also completes the job (pg, neon-ws only). @defaultValue false */
  transactional?: Tx;
  /** The most durable steps (`ctx.step`, `ctx.sleep`) one job may reach, 1..10000. @defaultValue 1000 */
  maxSteps?: number;
  /** The handler; may also be given later to the worker. */
  handler?: JobHandler<PayloadOutput<S>, Tx>;
  /** Payload fields shown as *** wherever a payload is displayed (dot paths, `*` wildcards). @defaultValue [] */
  sensitive?: readonly string[];
  /**
   * The ordering key of a job from its payload (e.g. the order id): at most one job per key runs at
   * a time, in enqueue order. An `orderingKey` enqueue option wins. @defaultValue none
   */
  orderingKey?: (payload: PayloadOutput<S>) => string | undefined;
  /**
   * What a job of this kind that ends dead does to its key: `continue` — the next job of the key
   * runs (SQS FIFO after a redrive); `hold` — the key waits until the dead job is replayed (it then
   * runs first). @defaultValue 'continue'
   */
  orderingOnDead?: 'continue' | 'hold';
  /**
   * At most this many jobs of the kind run at once, across every invocation (changeable at run
   * time: `skiplock kinds limit`). @defaultValue no limit
   */
  concurrency?: number;
  /**
   * The concurrency key of a job from its payload, e.g. the tenant: keyed jobs are claimed key by
   * key, so one key's backlog does not starve the others, and the queue's `keyConcurrency` caps
   * the running jobs of each key. A `concurrencyKey` enqueue option wins. @defaultValue none
   */
  concurrencyKey?: (payload: PayloadOutput<S>) => string | undefined;
  /**
   * The destination of a job from its payload, e.g. `new URL(payload.url).host`: while its circuit
   * breaker is open, or a Retry-After defers it, no job for it is claimed (and none burns an
   * attempt). A `destination` enqueue option wins. @defaultValue none
   */
  destination?: (payload: PayloadOutput<S>) => string | undefined;
  /**
   * The breaker of the kind's destinations: thresholds, cool-down, Retry-After (see
   * BreakerSettings). A worker's `breakers` option sets them per destination. Every job with a
   * destination takes part in its breaker (a job that should not: name no destination).
   * @defaultValue BREAKER_DEFAULTS
   */
  breaker?: Partial<BreakerSettings>;
  /**
   * At most `limit` jobs of the kind start in any `periodMs`, across every invocation (retries and
   * rescues are starts; changeable at run time: `skiplock rate-limits set kind …`). @defaultValue no limit
   */
  rateLimit?: RateLimit;
  /**
   * Its jobs start only inside this daily window, e.g. `{ start: '23:00', end: '06:00', timezone:
   * 'Europe/Berlin' }`: outside it they are not claimed and burn no attempt (a deadline still
   * applies). @defaultValue always
   */
  runWindow?: RunWindow;
}

export interface QueueOptions {
  /** The queue's name. */
  name: string;
  /** At most this many of its jobs run at once, across every invocation. @defaultValue no limit */
  concurrency?: number;
  /** At most this many of its jobs with the same concurrency key run at once. @defaultValue no limit */
  keyConcurrency?: number;
  /** At most `limit` of its jobs start in any `periodMs`, across every invocation. @defaultValue no limit */
  rateLimit?: RateLimit;
  /** At most `limit` of its jobs with the same concurrency key start in any `periodMs`. @defaultValue no limit */
  keyRateLimit?: RateLimit;
  /** Its jobs start only inside this daily window (e.g. 23:00–06:00 in a time zone). @defaultValue always */
  runWindow?: RunWindow;
}

type Rate = { maxStarts: number; periodMs: number } | undefined;

export interface QueueDefinition {
  readonly name: string;
  readonly concurrency: number | undefined;
  readonly keyConcurrency: number | undefined;
  readonly rateLimit: Rate;
  readonly keyRateLimit: Rate;
  readonly runWindow: WindowSpec | undefined;
}

/**
 * Defines a queue with limits, for kinds' `queue` option. The limits are declared in code: the
 * worker of these kinds applies them at every claim; `skiplock queues limit` overrides them at
 * run time.
 */
export function defineQueue(options: QueueOptions): QueueDefinition {
  const name = assertLabel('queue', options.name);
  return {
    name,
    concurrency: limitOption(`queue ${name}`, 'concurrency', options.concurrency),
    keyConcurrency: limitOption(`queue ${name}`, 'keyConcurrency', options.keyConcurrency),
    rateLimit: rateLimitOption(`queue ${name}`, 'rateLimit', options.rateLimit),
    keyRateLimit: rateLimitOption(`queue ${name}`, 'keyRateLimit', options.keyRateLimit),
    runWindow: runWindowOption(`queue ${name}`, options.runWindow),
  };
}

/** A concurrency limit: a whole number from 1 to 100,000, or absent. */
export function limitOption(owner: string, name: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 100_000) {
    throw new ConfigError(`${owner}: ${name} must be an integer from 1 to 100000`);
  }
  return value;
}

/** A job request for enqueueMany(): a kind, a payload and options. */
export interface JobRequest {
  // biome-ignore lint/suspicious/noExplicitAny: requests of different kinds travel together.
  job: JobDefinition<any, any>;
  payload: unknown;
  options: EnqueueOptions;
}

export interface JobDefinition<S extends PayloadSchema = PayloadSchema, Tx extends boolean = boolean> {
  readonly kind: string;
  readonly payloadSchema: S;
  readonly queue: string;
  readonly priority: number;
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly backoff: BackoffFn;
  readonly transactional: Tx;
  /** The most durable steps one job may reach. */
  readonly maxSteps: number;
  readonly handler: JobHandler<PayloadOutput<S>, Tx> | undefined;
  /** Payload paths masked wherever a payload is shown. */
  readonly sensitive: readonly string[];
  /** The ordering key of a payload, when the kind names one. */
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  readonly orderingKey: ((payload: any) => string | undefined) | undefined;
  readonly orderingOnDead: 'continue' | 'hold';
  /** The queue's definition, when the kind was given one (its limits). */
  readonly queueDefinition: QueueDefinition | undefined;
  /** At most this many jobs of the kind run at once. */
  readonly concurrency: number | undefined;
  /** The concurrency key of a payload, when the kind names one. */
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  readonly concurrencyKey: ((payload: any) => string | undefined) | undefined;
  /** The destination of a payload, when the kind names one. */
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  readonly destination: ((payload: any) => string | undefined) | undefined;
  /** The breaker settings of its destinations. */
  readonly breaker: BreakerSettings;
  /** At most this many of its jobs start per period. */
  readonly rateLimit: Rate;
  /** When its jobs may start. */
  readonly runWindow: WindowSpec | undefined;
  /** A batch kind's grouping and handler (defineBatchJob); undefined for a kind whose handler takes one job. */
  readonly batch: BatchSpec | undefined;
  /** A typed request for enqueueMany(). */
  with(payload: PayloadInput<S>, options?: EnqueueOptions): JobRequest;
}

export const JOB_DEFAULTS = {
  queue: 'default',
  priority: 0,
  maxAttempts: 25,
  timeoutMs: 30_000,
  maxSteps: 1_000,
} as const;

/** Defines a job kind once: its payload schema, defaults and (optionally) its handler. */
export function defineJob<S extends PayloadSchema, Tx extends boolean = false>(
  options: JobKindOptions<S, Tx>,
): JobDefinition<S, Tx> {
  if ((options as { batch?: unknown }).batch !== undefined) {
    throw new ConfigError(
      `${String(options.kind)}: a kind whose handler takes a batch is defined with defineBatchJob (its handler gets an array of jobs)`,
    );
  }
  return buildDefinition(options, undefined);
}

/** A kind's definition from its options, checked (defineJob, defineBatchJob). */
export function buildDefinition<S extends PayloadSchema, Tx extends boolean = false>(
  options: JobKindOptions<S, Tx>,
  batch: BatchSpec | undefined,
): JobDefinition<S, Tx> {
  const kind = assertLabel('kind', options.kind);
  const queueDefinition = typeof options.queue === 'object' && options.queue !== null ? options.queue : undefined;
  const queue = assertLabel(
    'queue',
    queueDefinition ? queueDefinition.name : ((options.queue as string | undefined) ?? JOB_DEFAULTS.queue),
  );
  const priority = options.priority ?? JOB_DEFAULTS.priority;
  const maxAttempts = options.maxAttempts ?? JOB_DEFAULTS.maxAttempts;
  const timeoutMs = options.timeoutMs ?? JOB_DEFAULTS.timeoutMs;
  if (!Number.isInteger(priority) || priority < -1000 || priority > 1000) {
    throw new ConfigError(`${kind}: priority must be an integer from -1000 to 1000`);
  }
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 1000) {
    throw new ConfigError(`${kind}: maxAttempts must be an integer from 1 to 1000`);
  }
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new ConfigError(`${kind}: timeoutMs must be a positive integer`);
  }
  const maxSteps = options.maxSteps ?? JOB_DEFAULTS.maxSteps;
  if (!Number.isInteger(maxSteps) || maxSteps < 1 || maxSteps > 10_000) {
    throw new ConfigError(`${kind}: maxSteps must be an integer from 1 to 10000`);
  }
  const definition: JobDefinition<S, Tx> = {
    kind,
    payloadSchema: options.payload,
    queue,
    priority,
    maxAttempts,
    timeoutMs,
    backoff: toBackoff(options.backoff),
    transactional: (options.transactional ?? false) as Tx,
    maxSteps,
    handler: options.handler,
    sensitive: options.sensitive ?? [],
    orderingKey: options.orderingKey,
    orderingOnDead: orderingOnDead(kind, options.orderingOnDead),
    queueDefinition,
    concurrency: limitOption(kind, 'concurrency', options.concurrency),
    concurrencyKey: options.concurrencyKey,
    destination: options.destination,
    breaker: breakerSettings(options.breaker, `kind ${kind}`),
    rateLimit: rateLimitOption(kind, 'rateLimit', options.rateLimit),
    runWindow: runWindowOption(kind, options.runWindow),
    batch,
    with: (payload, requestOptions = {}) => ({ job: definition, payload, options: requestOptions }),
  };
  return definition;
}

function orderingOnDead(kind: string, value: unknown): 'continue' | 'hold' {
  if (value === undefined) return 'continue';
  if (value === 'continue' || value === 'hold') return value;
  throw new ConfigError(`${kind}: orderingOnDead must be 'continue' or 'hold'`);
}

/**
 * The concurrency limits a set of kinds declares: each kind's `concurrency`, and the limits of the
 * queue definitions they name. Two definitions of one queue must agree.
 */
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export function declaredLimits(definitions: readonly JobDefinition<any, any>[]): DeclaredLimit[] {
  const limits: DeclaredLimit[] = [];
  const queues = new Map<string, QueueDefinition>();
  for (const d of definitions) {
    if (d.concurrency !== undefined) limits.push({ scope: 'kind', name: d.kind, maxRunning: d.concurrency });
    const q = d.queueDefinition;
    if (!q) continue;
    const seen = queues.get(q.name);
    if (seen && !sameLimits(seen, q)) throw new ConfigError(`queue ${q.name} is defined twice with different limits`);
    if (seen) continue;
    queues.set(q.name, q);
    if (q.concurrency !== undefined) limits.push({ scope: 'queue', name: q.name, maxRunning: q.concurrency });
    if (q.keyConcurrency !== undefined) limits.push({ scope: 'key', name: q.name, maxRunning: q.keyConcurrency });
  }
  return limits;
}

const sameRate = (a: Rate, b: Rate) => a?.maxStarts === b?.maxStarts && a?.periodMs === b?.periodMs;
const sameWindow = (a: WindowSpec | undefined, b: WindowSpec | undefined) =>
  a?.startMinute === b?.startMinute && a?.endMinute === b?.endMinute && a?.timezone === b?.timezone;
const sameLimits = (a: QueueDefinition, b: QueueDefinition) =>
  a.concurrency === b.concurrency &&
  a.keyConcurrency === b.keyConcurrency &&
  sameRate(a.rateLimit, b.rateLimit) &&
  sameRate(a.keyRateLimit, b.keyRateLimit) &&
  sameWindow(a.runWindow, b.runWindow);

/**
 * The rate limits a set of kinds declares: each kind's `rateLimit`, and the rates of the queue
 * definitions they name (declaredLimits checks that two definitions of one queue agree).
 */
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export function declaredRateLimits(definitions: readonly JobDefinition<any, any>[]): DeclaredRateLimit[] {
  const rates: DeclaredRateLimit[] = [];
  const queues = new Set<string>();
  for (const d of definitions) {
    if (d.rateLimit) rates.push({ scope: 'kind', name: d.kind, ...d.rateLimit });
    const q = d.queueDefinition;
    if (!q || queues.has(q.name)) continue;
    queues.add(q.name);
    if (q.rateLimit) rates.push({ scope: 'queue', name: q.name, ...q.rateLimit });
    if (q.keyRateLimit) rates.push({ scope: 'key', name: q.name, ...q.keyRateLimit });
  }
  return rates;
}

/** The run windows a set of kinds declares: each kind's, and those of the queue definitions they name. */
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export function declaredWindows(definitions: readonly JobDefinition<any, any>[]): DeclaredWindow[] {
  const windows: DeclaredWindow[] = [];
  const queues = new Set<string>();
  for (const d of definitions) {
    if (d.runWindow) windows.push({ scope: 'kind', name: d.kind, ...d.runWindow });
    const q = d.queueDefinition;
    if (!q?.runWindow || queues.has(q.name)) continue;
    queues.add(q.name);
    windows.push({ scope: 'queue', name: q.name, ...q.runWindow });
  }
  return windows;
}

/** Looks kinds up by name, for enqueue by name (HTTP, CLI) and for the worker. */
export class JobRegistry {
  // biome-ignore lint/suspicious/noExplicitAny: a registry holds kinds of every payload type.
  readonly #kinds = new Map<string, JobDefinition<any, any>>();

  // biome-ignore lint/suspicious/noExplicitAny: see above.
  constructor(definitions: readonly JobDefinition<any, any>[] = []) {
    for (const definition of definitions) this.add(definition);
  }

  // biome-ignore lint/suspicious/noExplicitAny: see above.
  add(definition: JobDefinition<any, any>): this {
    if (this.#kinds.has(definition.kind)) throw new ConfigError(`job kind ${definition.kind} is defined twice`);
    this.#kinds.set(definition.kind, definition);
    return this;
  }

  // biome-ignore lint/suspicious/noExplicitAny: see above.
  get(kind: string): JobDefinition<any, any> {
    const definition = this.#kinds.get(kind);
    if (!definition) throw new UnknownKindError(kind, this.kinds());
    return definition;
  }

  kinds(): string[] {
    return [...this.#kinds.keys()].sort();
  }

  // biome-ignore lint/suspicious/noExplicitAny: see above.
  all(): JobDefinition<any, any>[] {
    return [...this.#kinds.values()];
  }
}
