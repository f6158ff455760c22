import * as z from 'zod/mini';
import type { ReplayResult } from '../../base/outcomes.js';
import { systemClock } from '../../core/clock.js';
import { createEnqueuer, type EnqueueResult } from '../../core/enqueue.js';
import type { EnqueueOptions } from '../../core/enqueue-options.js';
import { check, describeIssues } from '../../core/issues.js';
import type { JobDefinition, JobRegistry, JobRequest } from '../../core/jobs.js';
import { type MaintenanceReport, runMaintenance } from '../../core/maintenance.js';
import type { QueueMetrics } from '../../core/metrics.js';
import type { Nudger } from '../../core/nudge.js';
import { replay } from '../../core/replay.js';
import { readSignalToken, SIGNAL_SECRET_MIN_LENGTH } from '../../core/signal-tokens.js';
import { type SignalResult, sendSignal } from '../../core/signals.js';
import type { Tracing } from '../../core/tracing.js';
import {
  createWorker,
  type InvocationStarter,
  type InvocationSummary,
  type Worker,
  type WorkerOptions,
} from '../../core/worker/index.js';
import type { SkiplockConnection } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import type { SkiplockConfig } from '../config.js';
import { emfMetrics } from '../metrics.js';
import { type FunctionRuntime, isAuthFailure } from '../runtime.js';
import { HttpError } from './http.js';
import type { WorkerChoices } from './options.js';

/**
 * The request bodies' schemas, built on first use rather than at import: only the enqueue and
 * replay functions read bodies, and the worker (which imports this module too) never builds them.
 */
function buildBodySchemas() {
  const isoDate = z.pipe(
    z.iso.datetime({ offset: true }),
    z.transform((s: string) => new Date(s)),
  );
  // Job ids, as strings or positive integers.
  const ids = (max: number) =>
    z.optional(
      z.array(z.pipe(z.union([z.string(), z.int().check(z.positive())]), z.transform(String))).check(z.maxLength(max)),
    );

  const enqueueOptionsSchema = z.strictObject({
    queue: z.optional(z.string()),
    priority: z.optional(z.number()),
    runAt: z.optional(isoDate),
    delayMs: z.optional(z.number()),
    maxAttempts: z.optional(z.number()),
    deadline: z.optional(isoDate),
    dedupe: z.optional(
      z.strictObject({
        key: z.string(),
        mode: z.optional(z.enum(['skip', 'replace', 'window'])),
        windowMs: z.optional(z.number()),
      }),
    ),
    correlationId: z.optional(z.string()),
    // Job ids (in a flow, also the names of its other steps).
    after: ids(1000),
    onParentFailure: z.optional(z.enum(['cancel', 'run'])),
  });

  const jobInput = z.strictObject({
    kind: z.string(),
    payload: z.unknown(),
    options: z.optional(enqueueOptionsSchema),
  });

  // The enqueue body: one job, `{ jobs: [...] }` (at most 1000), or a flow `{ flow: { name: job, … } }`.
  const enqueueBody = z.union([
    jobInput,
    z.strictObject({ jobs: z.array(jobInput).check(z.minLength(1), z.maxLength(1000)) }),
    z.strictObject({
      flow: z.record(z.string(), jobInput).check(
        z.refine((steps) => Object.keys(steps).length >= 1 && Object.keys(steps).length <= 1000, {
          message: 'a flow has 1 to 1000 steps',
        }),
      ),
    }),
  ]);

  const replayBody = z.strictObject({
    ids: ids(10_000),
    kind: z.optional(z.string()),
    queue: z.optional(z.string()),
    reason: z.optional(z.string()),
    since: z.optional(isoDate),
    until: z.optional(isoDate),
    all: z.optional(z.boolean()),
    limit: z.optional(z.int()),
    dryRun: z.optional(z.boolean()),
    resetAttempts: z.optional(z.boolean()),
    override: z.optional(
      z.strictObject({
        payload: z.optional(z.unknown()),
        queue: z.optional(z.string()),
        priority: z.optional(z.int()),
        maxAttempts: z.optional(z.int()),
      }),
    ),
    by: z.optional(z.string().check(z.maxLength(255))),
  });
  return { jobInput, enqueueBody, replayBody };
}

let bodySchemasBuilt: ReturnType<typeof buildBodySchemas> | undefined;
function bodySchemas(): ReturnType<typeof buildBodySchemas> {
  bodySchemasBuilt ??= buildBodySchemas();
  return bodySchemasBuilt;
}

type JobInput = z.output<ReturnType<typeof buildBodySchemas>['jobInput']>;

function parseBody<T extends z.ZodMiniType>(schema: T, body: unknown): z.output<T> {
  const parsed = check(schema, body);
  if (!parsed.success)
    throw new HttpError(400, 'invalid_request', `invalid request: ${describeIssues(parsed.error, 'body')}`);
  return parsed.data;
}

/** Validates an enqueue body and enqueues it in one statement. */
export async function enqueueFromBody(
  runtime: FunctionRuntime,
  registry: JobRegistry,
  body: unknown,
  nudger?: Nudger,
  tracing?: Tracing,
): Promise<{ results: EnqueueResult[] } | { flow: Record<string, EnqueueResult> }> {
  const input = parseBody(bodySchemas().enqueueBody, body);
  const toRequest = (item: JobInput): JobRequest => ({
    job: registry.get(item.kind),
    payload: item.payload,
    options: (item.options ?? {}) as EnqueueOptions,
  });
  const config = runtime.settings.require('enqueue');
  // The nudger also hears when each write is due (noteDue); the nudge itself is ours, after the commit.
  const enqueuer = createEnqueuer({ schema: config.schema, maxPayloadBytes: config.maxPayloadBytes, tracing, nudger });
  // Committed (one statement, no transaction of ours): start the workers of these queues now.
  const nudge = (requests: readonly JobRequest[]) => nudger?.nudge(requests.map((r) => r.options.queue ?? r.job.queue));
  if ('flow' in input) {
    const steps = Object.fromEntries(Object.entries(input.flow).map(([name, item]) => [name, toRequest(item)]));
    const flow = await runtime.withDb((db) => enqueuer.enqueueFlow(db, steps));
    await nudge(Object.values(steps));
    return { flow };
  }
  const requests = ('jobs' in input ? input.jobs : [input]).map(toRequest);
  const results = await runtime.withDb((db) => enqueuer.enqueueMany(db, requests));
  await nudge(requests);
  return { results };
}

/**
 * The signal route: checks the callback token (signature, expiry) against SKIPLOCK_SIGNAL_SECRET,
 * then sends one signal on its key with the request's JSON as the payload — once: a second use
 * of the token is refused (409) and sends nothing. With a nudger, starts the workers of the queues
 * of the jobs it woke (the signal is committed by then).
 */
export async function signalFromToken(
  runtime: FunctionRuntime,
  secret: string | undefined,
  token: string | undefined,
  readBody: (maxBytes: number) => Promise<unknown>,
  nudger?: Nudger,
): Promise<{ signal: SignalResult }> {
  if (!secret || secret.length < SIGNAL_SECRET_MIN_LENGTH) {
    throw new HttpError(
      401,
      'unauthorized',
      `this endpoint is disabled${secret ? ': SKIPLOCK_SIGNAL_SECRET is shorter than' : ' until SKIPLOCK_SIGNAL_SECRET is set to at least'} ${SIGNAL_SECRET_MIN_LENGTH} characters`,
    );
  }
  const claims = readSignalToken(secret, token);
  const { schema, maxPayloadBytes, maxBodyBytes } = runtime.settings.require('enqueue');
  const body = await readBody(maxBodyBytes);
  const signal = await runtime.withDb((db) =>
    sendSignal(db, schema, claims.key, body, maxPayloadBytes, { tokenId: claims.tokenId }),
  );
  runtime.logger.info('signal', { key: claims.key, signalId: signal.id, woken: signal.woken });
  if (signal.queues.length > 0) {
    await nudger?.noteDue?.(signal.queues.map((queue) => ({ queue, at: null })));
    await nudger?.nudge(signal.queues);
  }
  return { signal };
}

/** Validates a replay body and replays; `by` defaults to the caller's label. */
export async function replayFromBody(
  runtime: FunctionRuntime,
  registry: JobRegistry,
  body: unknown,
  defaultBy: string,
): Promise<ReplayResult> {
  const input = parseBody(bodySchemas().replayBody, body);
  return runtime.withDb((db) =>
    replay(db, { ...input, by: input.by ?? defaultBy, schema: runtime.config.schema, registry }),
  );
}

/** One invocation of a deployed worker: the worker's options (WorkerChoices) and its own time and id. */
export interface WorkerRun extends Omit<WorkerChoices, 'env' | 'fanOut' | 'test'> {
  /** Milliseconds this invocation may run. */
  remainingMs: number;
  invocationId?: string;
  /** Starts more invocations of this worker, used when SKIPLOCK_MAX_INVOCATIONS is set. @defaultValue none */
  fanOut?: InvocationStarter;
  /** What the invocations are counted under; wins over SKIPLOCK_WORKER_NAME. @defaultValue the configured name */
  name?: string;
  /** An idle invocation reads when something is next due (WorkerOptions.nextDue). @defaultValue false */
  nextDue?: boolean;
  /** The time the statements use instead of the database's clock (WorkerOptions.test; tests only). */
  test?: WorkerOptions['test'];
}

/** What a worker is built from: everything in a WorkerRun but the invocation's own time and id. */
type WorkerInputs = Omit<WorkerRun, 'remainingMs' | 'invocationId'>;
type BuiltWorker = { inputs: WorkerInputs; worker: Worker };
/** Workers kept per pool: more (another route name, fan-out target…) and the oldest is dropped. */
const MAX_WORKERS_PER_POOL = 8;

/**
 * The worker of one deployed worker function (a Lambda handler, a Vercel route), made when the
 * handler is made and kept as long as the warm instance: what the core keeps between invocations
 * (the `workers` row written once a minute, kinds_never_fit said once, the claim shape the last
 * claim ended with, the steps' timings) lasts as long as the instance, not one invocation. Each
 * invocation brings only its time left and its id. A worker is built again only when what it is
 * built from changes: a new pool (a rotated secret), other queues, kinds, name or fan-out starter.
 */
export class DeployedWorker {
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  readonly #jobs: readonly JobDefinition<any, any>[];
  readonly #byPool = new WeakMap<SkiplockConnection, Map<string, BuiltWorker>>();

  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  constructor(jobs: readonly JobDefinition<any, any>[]) {
    this.#jobs = jobs;
  }

  /**
   * One worker invocation for the kinds and queues this function handles: the ones its code
   * names, else the ones SKIPLOCK_KINDS / SKIPLOCK_QUEUES name, else all of them.
   */
  async run(runtime: FunctionRuntime, run: WorkerRun): Promise<InvocationSummary> {
    const config = runtime.settings.require('worker');
    const { remainingMs, invocationId, ...inputs } = run;
    const clock = run.clock ?? systemClock;
    // An absolute deadline: a rerun after a refused login gets only the time that is left.
    const deadlineAt = clock.now() + remainingMs;
    const summary = await runtime.withDb(
      (db) =>
        this.#workerFor(db, runtime, config, inputs).runInvocation({
          remainingMs: Math.max(0, deadlineAt - clock.now()),
          invocationId,
        }),
      (result) => result.stoppedBecause === 'error' && isAuthFailure(result.errorCode),
    );
    if (config.metrics === 'emf') emfMetrics().invocation(summary, config.serviceName);
    return summary;
  }

  #workerFor(db: SkiplockConnection, runtime: FunctionRuntime, config: SkiplockConfig, inputs: WorkerInputs): Worker {
    const kinds = inputs.kinds ?? config.kinds;
    const queues = inputs.queues ?? config.queues;
    const name = inputs.name ?? config.workerName;
    const { slowQueues } = inputs;
    // JSON writes an unset list as null.
    const key = JSON.stringify([kinds, queues, slowQueues, name, inputs.nextDue ?? config.idle]);
    let built = this.#byPool.get(db);
    if (!built) {
      built = new Map();
      this.#byPool.set(db, built);
    }
    const known = built.get(key);
    if (known && sameInputs(known.inputs, inputs)) return known.worker;
    const worker = createWorker({
      db,
      jobs: kinds ? this.#jobs.filter((j) => kinds.includes(j.kind)) : this.#jobs,
      schema: config.schema,
      queues,
      slowQueues,
      concurrency: config.concurrency,
      batchSize: config.batchSize,
      safetyMarginMs: config.safetyMarginMs,
      leaseGraceMs: config.leaseGraceMs,
      completedJobs: config.completedJobs,
      logger: runtime.logger,
      clock: inputs.clock,
      name,
      maxInvocations: config.maxInvocations,
      fanOut: config.maxInvocations === undefined ? undefined : inputs.fanOut,
      fanOutTargetMs: config.fanOutTargetMs,
      lingerMs: config.lingerMs,
      // An idle invocation reads when its worker is next due (the platform's wake plan): Lambda's
      // with SKIPLOCK_IDLE; a Vercel route says whether it has a hint store to keep it in.
      nextDue: inputs.nextDue ?? config.idle,
      schedules: inputs.schedules,
      tracing: inputs.tracing,
      metrics: inputs.metrics,
      drizzle: inputs.drizzle,
      test: inputs.test,
    });
    built.delete(key);
    built.set(key, { inputs, worker });
    if (built.size > MAX_WORKERS_PER_POOL) built.delete(built.keys().next().value as string);
    return worker;
  }
}

/** The objects a worker was built with are the same ones (the lists are compared by key). */
function sameInputs(a: WorkerInputs, b: WorkerInputs): boolean {
  return (['clock', 'fanOut', 'schedules', 'tracing', 'metrics', 'drizzle', 'test'] as const).every(
    (k) => a[k] === b[k],
  );
}

/**
 * Expire deadlines, prune by retention, report stats (logged as one line). With
 * `migrateFirst`, applies pending migrations before (a deploy step: invoke with {"migrate": true}).
 */
export async function runMaintenanceTick(
  runtime: FunctionRuntime,
  remainingMs: number,
  migrateFirst = false,
  queueMetrics?: QueueMetrics,
): Promise<MaintenanceReport & { migrated?: string[] }> {
  const config = runtime.settings.require('maintenance');
  const migrated = migrateFirst
    ? (await runtime.withDb((db) => migrate(db, { schema: config.schema }))).applied
    : undefined;
  const tick = await runtime.withDb((db) =>
    runMaintenance(db, {
      schema: config.schema,
      completedRetentionMs: config.completedRetentionHours * 3_600_000,
      deadRetentionMs: config.deadRetentionHours * 3_600_000,
      eventRetentionMs: config.eventRetentionHours * 3_600_000,
      maxDurationMs: Math.max(1_000, remainingMs - config.safetyMarginMs),
      metrics: queueMetrics,
    }),
  );
  const report = migrated ? { migrated, ...tick } : tick;
  runtime.logger.info('maintenance', { ...report });
  // Ready jobs on a queue no deployed worker served lately: a name in code that no worker lists.
  for (const row of tick.stats.filter((r) => r.unserved)) {
    runtime.logger.warn('queue_unserved', {
      queue: row.queue,
      kind: row.kind,
      ready: row.ready,
      oldestReadyAgeSeconds: row.oldestReadyAgeSeconds,
      hint: 'no worker served this queue and kind in the last 10 minutes: check the workers’ SKIPLOCK_QUEUES and kinds',
    });
  }
  // Events no subscription was active for when they were published (docs/events.md).
  for (const event of tick.unsubscribedEvents) {
    runtime.logger.warn('event_unsubscribed', {
      event: event.name,
      published: event.count,
      lastPublishedAt: event.lastPublishedAt.toISOString(),
      hint: 'no subscription was active for this event when it was published in the last 24 hours: deploy its subscribers (skiplock sync), then replay them (skiplock events replay)',
    });
  }
  if (config.metrics === 'emf') emfMetrics().queues(tick.stats, config.serviceName);
  return report;
}
