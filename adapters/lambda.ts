import { ConfigError } from '../base/errors.js';
import type { Clock } from '../core/clock.js';
import type { JobDefinition } from '../core/jobs.js';
import { JobRegistry } from '../core/jobs.js';
import type { JobMetrics, QueueMetrics } from '../core/metrics.js';
import type { Nudger } from '../core/nudge.js';
import type { ScheduleDefinition } from '../core/schedules.js';
import type { Tracing } from '../core/tracing.js';
import type { InvocationStarter } from '../core/worker/index.js';
import type { DrizzleFactory } from '../db/connection-options.js';
import type { ConsoleOptions } from './console/index.js';
import {
  type ConsoleHttpEvent,
  type ConsoleHttpResult,
  createLambdaConsole as consoleHandler,
} from './console/platforms.js';
import { controlFromBody } from './control.js';
import {
  decodeUtf8,
  errorResponse,
  HttpError,
  type HttpRequest,
  type HttpResponse,
  readJson,
  readOptionalJson,
  requireBearer,
  tooLarge,
} from './http.js';
import { createLambdaNudger, lambdaStarter } from './lambda-invoke.js';
import { instanceWakes, wakeAfterMaintenance, wakeAfterWorker } from './lambda-wake-plan.js';
import { DeployedWorker, enqueueFromBody, replayFromBody, runMaintenanceTick, signalFromToken } from './operations.js';
import { type FunctionRuntime, publicMessage, sharedRuntime } from './runtime.js';
import { refuseUnfitKinds } from './worker-fit.js';

/** The parts of the Lambda context skiplock uses. */
export interface LambdaContext {
  getRemainingTimeInMillis(): number;
  awsRequestId?: string;
  functionName?: string;
  /** The ARN the function was invoked by: the target of its own one-off wake-ups. */
  invokedFunctionArn?: string;
}

/** API Gateway HTTP API (payload 2.0) and function URL events. */
export interface HttpApiEvent {
  version?: string;
  rawPath?: string;
  headers?: Record<string, string | undefined>;
  body?: string | null;
  isBase64Encoded?: boolean;
  queryStringParameters?: Record<string, string | undefined>;
  requestContext: { http: { method: string } };
}

export interface HttpApiResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

/** Turns a failure to even load the configuration into a logged line and a result, never a stack. */
function runtimeOrFailure(env: Env): FunctionRuntime | { error: string } {
  try {
    return sharedRuntime(env);
  } catch (err) {
    const error = publicMessage(err);
    process.stdout.write(`${JSON.stringify({ level: 'error', msg: 'function_misconfigured', error })}\n`);
    return { error };
  }
}

export interface LambdaWorkerOptions {
  /** @defaultValue process.env */
  env?: Env;
  /** Only these queues; wins over SKIPLOCK_QUEUES. @defaultValue SKIPLOCK_QUEUES, else all */
  queues?: readonly string[];
  /** Only these kinds; wins over SKIPLOCK_KINDS. @defaultValue SKIPLOCK_KINDS, else all of `jobs` */
  kinds?: readonly string[];
  /** The invocation's clock (tests). @defaultValue the system clock */
  clock?: Clock;
  /**
   * The function's timeout in ms (serverless.yml's `timeout` × 1000). Given, a kind of this worker's
   * queues whose timeoutMs + SKIPLOCK_SAFETY_MARGIN_MS exceeds it would never run, and is refused
   * with a ConfigError as the handler is made (when the module loads). @defaultValue unset: Lambda
   * tells the time only to an invocation, so each one checks its kinds against the time its context
   * has left — the summary names those that never fit (`unfit`), `stoppedBecause` is
   * `'no_kind_fits'` when none does, and the stats and `jobs why` flag their jobs
   */
  invocationMs?: number;
  /**
   * How more invocations start when SKIPLOCK_MAX_INVOCATIONS is set and the backlog needs them:
   * `false` turns fan-out off (the cap still holds). @defaultValue asynchronous Invokes of this
   * function (its name from the Lambda context)
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
   * Tests: the time the database judges the worker's claims at (as WorkerOptions.test.now), also
   * the wall time its wake-ups are armed for — a simulated day runs in milliseconds. @defaultValue unset
   */
  test?: { now?: () => Date };
}

/**
 * How the worker fans out: the option, else asynchronous Invokes of this function — one starter
 * per function name, so that the instance's worker is built once (see DeployedWorker).
 */
function fanOutStarters(option: InvocationStarter | false | undefined) {
  let own: { functionName: string; starter: InvocationStarter } | undefined;
  return (context: LambdaContext): InvocationStarter | undefined => {
    if (option === false) return undefined;
    if (option) return option;
    const functionName = context.functionName ?? process.env.AWS_LAMBDA_FUNCTION_NAME;
    if (!functionName) return undefined;
    if (own?.functionName !== functionName) own = { functionName, starter: lambdaStarter(functionName) };
    return own.starter;
  };
}

/**
 * Scheduled (EventBridge) worker: one invocation sized by the Lambda's remaining time. Any event
 * starts it: a schedule, a nudge, or another invocation fanning out. The worker is made once per
 * warm instance and kept across its invocations.
 */
export function createLambdaWorker(jobs: Kinds, options: LambdaWorkerOptions = {}) {
  const { invocationMs } = options;
  if (
    invocationMs !== undefined &&
    !(Number.isInteger(invocationMs) && invocationMs >= 1_000 && invocationMs <= 900_000)
  ) {
    throw new ConfigError("invocationMs must be the function's timeout in ms, a whole number from 1000 to 900000");
  }
  refuseUnfitKinds(jobs, options.env ?? process.env, options, () => invocationMs);
  const worker = new DeployedWorker(jobs);
  const fanOutOf = fanOutStarters(options.fanOut);
  const wakesOf = instanceWakes(options.test?.now);
  return async (_event: unknown, context: LambdaContext) => {
    const runtime = runtimeOrFailure(options.env ?? process.env);
    if ('error' in runtime) return { ok: false, error: runtime.error };
    try {
      const summary = await worker.run(runtime, {
        remainingMs: context.getRemainingTimeInMillis(),
        invocationId: context.awsRequestId,
        queues: options.queues,
        kinds: options.kinds,
        clock: options.clock,
        fanOut: fanOutOf(context),
        schedules: options.schedules,
        tracing: options.tracing,
        metrics: options.metrics,
        drizzle: options.drizzle,
        test: options.test,
      });
      await wakeAfterWorker(runtime, wakesOf, context, summary);
      return summary;
    } catch (err) {
      runtime.logger.error('worker_failed', { error: publicMessage(err) });
      return { ok: false, error: publicMessage(err) };
    }
  };
}

/**
 * Scheduled maintenance: deadlines to the DLQ, retention pruning, stats. Invoked with
 * `{"migrate": true}` it first applies pending migrations (run it once after each deploy).
 */
export function createLambdaMaintenance(
  options: { env?: Env; metrics?: QueueMetrics; test?: { now?: () => Date } } = {},
) {
  const wakesOf = instanceWakes(options.test?.now);
  return async (event: unknown, context: LambdaContext) => {
    const runtime = runtimeOrFailure(options.env ?? process.env);
    if ('error' in runtime) return { ok: false, error: runtime.error };
    try {
      const migrateFirst =
        typeof event === 'object' && event !== null && (event as { migrate?: unknown }).migrate === true;
      const report = await runMaintenanceTick(
        runtime,
        context.getRemainingTimeInMillis(),
        migrateFirst,
        options.metrics,
      );
      await wakeAfterMaintenance(runtime, wakesOf, context, report.quiet);
      return { ok: true, ...report };
    } catch (err) {
      runtime.logger.error('maintenance_failed', { error: publicMessage(err) });
      return { ok: false, error: publicMessage(err) };
    }
  };
}

function isHttpEvent(event: unknown): event is HttpApiEvent {
  return (
    typeof event === 'object' &&
    event !== null &&
    'requestContext' in event &&
    typeof (event as HttpApiEvent).requestContext?.http?.method === 'string'
  );
}

function fromHttpApiEvent(event: HttpApiEvent): HttpRequest {
  const headers = Object.fromEntries(Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    method: event.requestContext.http.method.toUpperCase(),
    header: (name) => headers[name.toLowerCase()],
    readBody: async (maxBytes) => {
      const raw = event.body ?? '';
      const bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
      if (bytes.length > maxBytes) throw tooLarge(maxBytes);
      return decodeUtf8(bytes);
    },
  };
}

function toHttpApiResult(response: HttpResponse): HttpApiResult {
  return {
    statusCode: response.status,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(response.body),
  };
}

/**
 * Enqueue: over HTTP (API Gateway HTTP API / function URL, bearer SKIPLOCK_ENQUEUE_TOKEN)
 * or by direct invoke (IAM-authorized; the event is the body). Body: `{ kind, payload,
 * options? }`, `{ jobs: [...] }` or `{ flow: { step: job } }`. Answers `{ results: [{ id, outcome }] }`
 * (a flow: `{ flow: { step: { id, outcome } } }`).
 */
export interface LambdaEnqueueOptions {
  /** @defaultValue process.env */
  env?: Env;
  /**
   * Starts the workers of the enqueued jobs' queues after each enqueue. @defaultValue
   * asynchronous Invokes of the functions SKIPLOCK_NUDGE_FUNCTIONS names (none when unset)
   */
  nudger?: Nudger;
  /** The nudges' clock (tests: the coalescing window). @defaultValue the system clock */
  clock?: Clock;
  /** A producer span around each enqueue, its context stored with the jobs (`otelTracing()`). @defaultValue none */
  tracing?: Tracing;
}

export interface LambdaSignalOptions {
  /** @defaultValue process.env */
  env?: Env;
  /**
   * Starts the workers of the jobs a signal woke. @defaultValue asynchronous Invokes of the
   * functions SKIPLOCK_NUDGE_FUNCTIONS names (none when unset)
   */
  nudger?: Nudger;
  /** The nudges' clock (tests: the coalescing window). @defaultValue the system clock */
  clock?: Clock;
}

export function createLambdaEnqueue(jobs: Kinds, options: LambdaEnqueueOptions = {}) {
  const registry = new JobRegistry(jobs);
  const nudgerOf = lambdaNudgers(options);
  return invokeOrHttp(options.env, 'SKIPLOCK_ENQUEUE_TOKEN', 'enqueue', async (runtime, body) => ({
    status: 200,
    body: await enqueueFromBody(runtime, registry, body, nudgerOf(runtime), options.tracing),
  }));
}

/**
 * The nudger of a function's container (options.nudger, else asynchronous Invokes of the functions
 * SKIPLOCK_NUDGE_FUNCTIONS names): one per container, so that nudges coalesce across warm invocations.
 */
function lambdaNudgers(options: { nudger?: Nudger; clock?: Clock }): (runtime: FunctionRuntime) => Nudger | undefined {
  let nudgerFor: { key: string; nudger: Nudger } | undefined;
  return (runtime) => {
    if (options.nudger) return options.nudger;
    const { nudgeFunctions: functions, idle, wakeRoleArn, wakeGroup } = runtime.settings.require('enqueue');
    if (!functions) return undefined;
    // An idle app's writes also arm their worker's wake-up (docs/deploy-lambda.md).
    const wake = idle && wakeRoleArn ? { roleArn: wakeRoleArn, group: wakeGroup } : undefined;
    const key = JSON.stringify([functions, wake ?? null]);
    if (nudgerFor?.key !== key) {
      nudgerFor = {
        key,
        nudger: createLambdaNudger(functions, { logger: runtime.logger, clock: options.clock, wake }),
      };
    }
    return nudgerFor.nudger;
  };
}

/**
 * A function taken by direct invoke (IAM) or over an HTTP API route with a bearer token: the event
 * is the body, or the request's JSON once the token is checked. Answers an invoke with
 * `{ status, ...body }`, an HTTP event with an HTTP API result.
 */
function invokeOrHttp(
  envOption: Env | undefined,
  tokenName: 'SKIPLOCK_ENQUEUE_TOKEN' | 'SKIPLOCK_ADMIN_TOKEN',
  purpose: 'enqueue' | 'replay',
  handle: (runtime: FunctionRuntime, body: unknown, http: boolean, context?: LambdaContext) => Promise<HttpResponse>,
) {
  return async (event: unknown, context?: LambdaContext): Promise<HttpApiResult | Record<string, unknown>> => {
    const http = isHttpEvent(event);
    const respond = (response: HttpResponse) =>
      http ? toHttpApiResult(response) : { status: response.status, ...response.body };
    try {
      const env = envOption ?? process.env;
      let body: unknown = event;
      if (http) {
        // Authenticate before anything else: no configuration detail reaches an anonymous caller.
        const request = fromHttpApiEvent(event);
        requireBearer(request, env[tokenName], tokenName);
        body = await readJson(request, sharedRuntime(env).settings.require(purpose).maxBodyBytes);
      }
      return respond(await handle(sharedRuntime(env), body, http, context));
    } catch (err) {
      return respond(errorResponse(err));
    }
  };
}

/**
 * Replay dead jobs, by direct invoke only (no HTTP event is wired to it; an HTTP event is
 * refused). Body: ids or a filter, limit, dryRun, resetAttempts, override, by. Starts the workers of
 * the replayed jobs' queues as the enqueue function does (SKIPLOCK_NUDGE_FUNCTIONS).
 */
export function createLambdaReplay(jobs: Kinds, options: { env?: Env; nudger?: Nudger; clock?: Clock } = {}) {
  const registry = new JobRegistry(jobs);
  const nudgerOf = lambdaNudgers(options);
  return async (event: unknown, context?: LambdaContext): Promise<Record<string, unknown>> => {
    if (isHttpEvent(event)) {
      return { status: 404, error: { code: 'not_found', message: 'replay is invoke-only' } };
    }
    try {
      const runtime = sharedRuntime(options.env ?? process.env);
      const result = await replayFromBody(runtime, registry, event, `lambda:${context?.functionName ?? 'replay'}`);
      // Replayed jobs are due now: start (and, on an idle app, wake) the workers of their queues.
      const queues = [...new Set(result.replayed.map((job) => job.queue))];
      if (!result.dryRun && queues.length > 0) {
        const nudger = nudgerOf(runtime);
        await nudger?.noteDue?.(queues.map((queue) => ({ queue, at: null })));
        await nudger?.nudge(queues);
      }
      runtime.logger.info('replay', {
        replayed: result.replayed.length,
        refused: result.refused.length,
        dryRun: result.dryRun,
      });
      return { status: 200, ...result };
    } catch (err) {
      const response = errorResponse(err);
      return { status: response.status, ...response.body };
    }
  };
}

/**
 * Flow control on the deployed app: pause, resume and list (`{ action, queue | kind, reason?, by? }`).
 * By direct invoke (IAM), or over an HTTP API route with `Authorization: Bearer
 * $SKIPLOCK_ADMIN_TOKEN` (refused while the token is unset or shorter than 16 characters).
 */
export function createLambdaControl(options: { env?: Env } = {}) {
  return invokeOrHttp(options.env, 'SKIPLOCK_ADMIN_TOKEN', 'replay', async (runtime, body, http, context) => {
    const by = http ? 'lambda:control-http' : `lambda:${context?.functionName ?? 'control'}`;
    return { status: 200, body: { ...(await controlFromBody(runtime, body, by)) } };
  });
}

/**
 * Signal callbacks from outside, over an HTTP API route: `POST …?token=` with a token from
 * `createSignalToken` (signed with SKIPLOCK_SIGNAL_SECRET) sends one signal on its key, the JSON body
 * as its payload. No bearer token: the signed, expiring, single-use token is the credential. Starts
 * the workers of the woken jobs' queues as the enqueue function does (SKIPLOCK_NUDGE_FUNCTIONS).
 */
export function createLambdaSignal(options: LambdaSignalOptions = {}) {
  const nudgerOf = lambdaNudgers(options);
  return async (event: unknown): Promise<HttpApiResult> => {
    try {
      if (!isHttpEvent(event)) throw new HttpError(400, 'not_http', 'the signal function takes HTTP API events');
      const env = options.env ?? process.env;
      const request = fromHttpApiEvent(event);
      const token = event.queryStringParameters?.token;
      const read = (maxBytes: number) => readOptionalJson(request, maxBytes);
      const runtime = sharedRuntime(env);
      return toHttpApiResult({
        status: 200,
        body: await signalFromToken(runtime, env.SKIPLOCK_SIGNAL_SECRET, token, read, nudgerOf(runtime)),
      });
    } catch (err) {
      return toHttpApiResult(errorResponse(err));
    }
  };
}

export { CONFIG_VARIABLES, FUNCTION_DEFAULTS, loadConfig, type SkiplockConfig } from './config.js';
export { CONSOLE_LOGIN_THROTTLE, type ConsoleOptions } from './console/index.js';
export type { ConsoleHttpEvent, ConsoleHttpResult } from './console/platforms.js';

export interface LambdaConsoleOptions extends ConsoleOptions {
  /**
   * Starts the worker functions after each action (a replayed or resumed job runs at once, and on an
   * idle app it would otherwise wait for the next wake-up). @defaultValue asynchronous Invokes of
   * every function SKIPLOCK_NUDGE_FUNCTIONS names
   */
  nudger?: Nudger;
  /** The nudges' clock (tests). @defaultValue the system clock */
  clock?: Clock;
}

/**
 * The operator console (`export const handler = createLambdaConsole(jobs)`) behind HTTP API routes
 * or a function URL. An action that went through nudges every worker SKIPLOCK_NUDGE_FUNCTIONS names.
 */
export function createLambdaConsole(jobs: Kinds, options: LambdaConsoleOptions = {}) {
  const handle = consoleHandler(jobs, options);
  const nudgerOf = lambdaNudgers(options);
  return async (event: ConsoleHttpEvent): Promise<ConsoleHttpResult> => {
    const result = await handle(event);
    const method = event.requestContext?.http?.method?.toUpperCase();
    if (method === 'POST' && result.statusCode < 400 && (event.rawPath ?? '').endsWith('/actions')) {
      try {
        const runtime = sharedRuntime(options.env ?? process.env);
        const functions = runtime.settings.require('enqueue').nudgeFunctions;
        const nudger = nudgerOf(runtime);
        await nudger?.nudge(functions ? Object.keys(functions) : ['*']);
      } catch {
        // A setting the nudges need that is wrong never fails the action: the next tick runs the jobs.
      }
    }
    return result;
  };
}
export {
  createLambdaNudger,
  FAN_OUT_EVENT,
  lambdaStarter,
  MissingLambdaClientError,
  NUDGE_EVENT,
  type NudgeFunctions,
} from './lambda-invoke.js';
export { type LambdaWakeOptions, MissingSchedulerClientError, WAKE_EVENT } from './lambda-wake.js';
export { emfMetrics, type MetricsSink } from './metrics.js';
export { resetSharedRuntime } from './runtime.js';
