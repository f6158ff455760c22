import { ConfigError } from '../base/errors.js';
import type { InvocationStarter } from '../base/starter.js';
import type { Clock } from '../core/clock.js';
import type { QueueMetrics } from '../core/metrics.js';
import type { Nudger } from '../core/nudge.js';
import type { Tracing } from '../core/tracing.js';
import type { ConsoleOptions } from './console/index.js';
import { createLambdaNudger, lambdaStarter } from './lambda-invoke.js';
import { instanceWakes, wakeAfterMaintenance, wakeAfterWorker } from './lambda-wake-plan.js';
import { type FunctionRuntime, publicMessage, sharedRuntime } from './runtime.js';
import { errorResponse, HttpError, type HttpResponse, jsonResponse } from './web/http.js';
import { DeployedWorker, runMaintenanceTick } from './web/operations.js';
import type { Env, Kinds, NudgeChoices, WorkerChoices } from './web/options.js';
import {
  consoleRoute,
  controlRoute,
  enqueueRoute,
  invoke,
  type JsonOperation,
  perInstance,
  replayRoute,
  serve,
  signalRoute,
  type WebPlatform,
  type WebRoute,
} from './web/routes.js';
import { refuseUnfitKinds } from './worker-fit.js';

/**
 * skiplock/lambda: the web core's routes (adapters/web/routes.ts) behind Lambda's events. An API
 * Gateway HTTP API (payload 2.0) or function URL event becomes the Request the routes serve, and
 * their Response the event's result; a direct invoke (IAM) calls the same operation with the event
 * as its body; an EventBridge schedule (or a nudge's or fan-out's asynchronous Invoke) runs the
 * worker or maintenance for the time the context has left. Nudges and fan-out are asynchronous
 * Invokes; an idle app's wake-ups are one-off EventBridge Scheduler schedules.
 */

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
  rawQueryString?: string;
  headers?: Record<string, string | undefined>;
  /** Payload 2.0 puts the request's cookies here, not in a cookie header. */
  cookies?: string[];
  body?: string | null;
  isBase64Encoded?: boolean;
  queryStringParameters?: Record<string, string | undefined>;
  requestContext: { http: { method: string; sourceIp?: string }; domainName?: string };
}

export interface HttpApiResult {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

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

export interface LambdaWorkerOptions extends WorkerChoices {
  /**
   * The function's timeout in ms (serverless.yml's `timeout` × 1000). Given, a kind of this worker's
   * queues whose timeoutMs + SKIPLOCK_SAFETY_MARGIN_MS exceeds it would never run, and is refused
   * with a ConfigError as the handler is made (when the module loads). @defaultValue unset: Lambda
   * tells the time only to an invocation, so each one checks its kinds against the time its context
   * has left — the summary names those that never fit (`unfit`), `stoppedBecause` is
   * `'no_kind_fits'` when none does, and the stats and `jobs why` flag their jobs
   */
  invocationMs?: number;
}

/**
 * Scheduled (EventBridge) worker: one invocation sized by the Lambda's remaining time. Any event
 * starts it: a schedule, a nudge, or another invocation fanning out. The worker is made once per
 * warm instance and kept across its invocations.
 */
export function createLambdaWorker(jobs: Kinds, options: LambdaWorkerOptions = {}) {
  const { env, invocationMs, fanOut, ...choices } = options;
  if (
    invocationMs !== undefined &&
    !(Number.isInteger(invocationMs) && invocationMs >= 1_000 && invocationMs <= 900_000)
  ) {
    throw new ConfigError("invocationMs must be the function's timeout in ms, a whole number from 1000 to 900000");
  }
  refuseUnfitKinds(jobs, env ?? process.env, options, () => invocationMs);
  const worker = new DeployedWorker(jobs);
  // Fan-out: the option, else asynchronous Invokes of this function, one starter per function name
  // so that the instance's worker is built once (see DeployedWorker).
  const ownStarter = perInstance<InvocationStarter>();
  const fanOutOf = (context: LambdaContext): InvocationStarter | undefined => {
    if (fanOut !== undefined) return fanOut || undefined;
    const functionName = context.functionName ?? process.env.AWS_LAMBDA_FUNCTION_NAME;
    return functionName ? ownStarter([functionName], () => lambdaStarter(functionName)) : undefined;
  };
  const wakesOf = instanceWakes(options.test?.now);
  return async (_event: unknown, context: LambdaContext) => {
    const runtime = runtimeOrFailure(env ?? process.env);
    if ('error' in runtime) return { ok: false, error: runtime.error };
    try {
      const summary = await worker.run(runtime, {
        ...choices,
        remainingMs: context.getRemainingTimeInMillis(),
        invocationId: context.awsRequestId,
        fanOut: fanOutOf(context),
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

/**
 * The converter: an HTTP API event as the Web Request the routes serve (its path, query, headers,
 * payload 2.0's cookies, the body's bytes as sent; the routes decode and limit it).
 */
export function requestOf(event: HttpApiEvent): Request {
  // An event is JSON: no header's value is undefined.
  const headers = new Headers(event.headers as Record<string, string> | undefined);
  // Payload 2.0 moves the cookies out of their header.
  if (event.cookies) headers.set('cookie', event.cookies.concat(headers.get('cookie') ?? []).join('; '));
  const host = headers.get('host') ?? event.requestContext.domainName ?? 'localhost';
  const query = event.rawQueryString;
  const method = event.requestContext.http.method.toUpperCase();
  const raw = event.body;
  const body =
    raw && method !== 'GET' && method !== 'HEAD' ? Buffer.from(raw, event.isBase64Encoded ? 'base64' : 'utf8') : null;
  return new Request(`https://${host}${event.rawPath ?? '/'}${query ? `?${query}` : ''}`, { method, headers, body });
}

/** A route's JSON Response as an HTTP API result. */
const resultOf = async (response: Response): Promise<HttpApiResult> => ({
  statusCode: response.status,
  headers: { 'content-type': 'application/json' },
  body: await response.text(),
});

/** An error the routes never saw, answered as they answer theirs. */
const refused = (code: string, message: string) =>
  resultOf(jsonResponse(errorResponse(new HttpError(400, code, message))));

/** An HTTP API event through a route. An event no Request can hold is a 400. */
async function serveEvent(route: WebRoute, event: HttpApiEvent): Promise<HttpApiResult> {
  let request: Request;
  try {
    request = requestOf(event);
  } catch {
    return refused('bad_request', 'the request cannot be read');
  }
  return resultOf(await route(request));
}

/** A direct invoke's answer: `{ status, ...body }`. */
const invokeResult = (response: HttpResponse) => ({ status: response.status, ...response.body });

/** Lambda's side of the routes: the environment, and who a change over HTTP is recorded as. */
function lambdaPlatform(options: { env?: Env }): WebPlatform {
  return { env: () => options.env ?? process.env, by: (route) => `lambda:${route}-http` };
}

/**
 * …and of the routes that write: the instance's nudger (options.nudger, else asynchronous Invokes
 * of the functions SKIPLOCK_NUDGE_FUNCTIONS names, one per instance so that nudges coalesce across
 * warm invocations; on an idle app each write also arms its worker's wake-up). Kept apart so that a
 * function that never nudges (control) bundles no Lambda client.
 */
function nudgingLambdaPlatform(options: { env?: Env; nudger?: Nudger; clock?: Clock }): WebPlatform {
  const nudgerFor = perInstance<Nudger>();
  return {
    ...lambdaPlatform(options),
    nudger(runtime) {
      if (options.nudger) return options.nudger;
      const { nudgeFunctions: functions, idle, wakeRoleArn, wakeGroup } = runtime.settings.require('enqueue');
      if (!functions) return undefined;
      // An idle app's writes also arm their worker's wake-up (docs/deploy-lambda.md).
      const wake = idle && wakeRoleArn ? { roleArn: wakeRoleArn, group: wakeGroup } : undefined;
      return nudgerFor([functions, wake ?? null], () =>
        createLambdaNudger(functions, { logger: runtime.logger, clock: options.clock, wake }),
      );
    },
    nudgedQueues: (runtime) => {
      const functions = runtime.settings.require('enqueue').nudgeFunctions;
      return functions && Object.keys(functions);
    },
  };
}

/**
 * A function taken by direct invoke (IAM: the event is the body) or over an HTTP API route with a
 * bearer token. Answers an invoke with `{ status, ...body }`, an HTTP event with an HTTP API result.
 */
function invokeOrHttp(operation: JsonOperation, by?: (context: LambdaContext | undefined) => string) {
  const route = serve(operation);
  return async (event: unknown, context?: LambdaContext): Promise<HttpApiResult | Record<string, unknown>> =>
    isHttpEvent(event) ? serveEvent(route, event) : invokeResult(await invoke(operation, event, by?.(context)));
}

/** The enqueue function's options. */
export interface LambdaEnqueueOptions extends NudgeChoices {
  /** A producer span around each enqueue, its context stored with the jobs (`otelTracing()`). @defaultValue none */
  tracing?: Tracing;
}

/** The signal function's options. */
export type LambdaSignalOptions = NudgeChoices;

/**
 * Enqueue: over HTTP (API Gateway HTTP API / function URL, bearer SKIPLOCK_ENQUEUE_TOKEN)
 * or by direct invoke (IAM-authorized; the event is the body). Body: `{ kind, payload,
 * options? }`, `{ jobs: [...] }` or `{ flow: { step: job } }`. Answers `{ results: [{ id, outcome }] }`
 * (a flow: `{ flow: { step: { id, outcome } } }`).
 */
export function createLambdaEnqueue(jobs: Kinds, options: LambdaEnqueueOptions = {}) {
  return invokeOrHttp(enqueueRoute(jobs, nudgingLambdaPlatform(options), options));
}

/**
 * Replay dead jobs, by direct invoke only (no HTTP event is wired to it; an HTTP event is
 * refused). Body: ids or a filter, limit, dryRun, resetAttempts, override, by. Starts the workers of
 * the replayed jobs' queues as the enqueue function does (SKIPLOCK_NUDGE_FUNCTIONS).
 */
export function createLambdaReplay(jobs: Kinds, options: NudgeChoices = {}) {
  const route = replayRoute(jobs, nudgingLambdaPlatform(options));
  return async (event: unknown, context?: LambdaContext): Promise<Record<string, unknown>> => {
    if (isHttpEvent(event)) {
      return { status: 404, error: { code: 'not_found', message: 'replay is invoke-only' } };
    }
    return invokeResult(await invoke(route, event, `lambda:${context?.functionName ?? 'replay'}`));
  };
}

/**
 * Flow control on the deployed app: pause, resume and list (`{ action, queue | kind, reason?, by? }`).
 * By direct invoke (IAM), or over an HTTP API route with `Authorization: Bearer
 * $SKIPLOCK_ADMIN_TOKEN` (refused while the token is unset or shorter than 16 characters).
 */
export function createLambdaControl(options: { env?: Env } = {}) {
  return invokeOrHttp(
    controlRoute(lambdaPlatform(options)),
    (context) => `lambda:${context?.functionName ?? 'control'}`,
  );
}

/**
 * Signal callbacks from outside, over an HTTP API route: `POST …?token=` with a token from
 * `createSignalToken` (signed with SKIPLOCK_SIGNAL_SECRET) sends one signal on its key, the JSON body
 * as its payload. No bearer token: the signed, expiring, single-use token is the credential. Starts
 * the workers of the woken jobs' queues as the enqueue function does (SKIPLOCK_NUDGE_FUNCTIONS).
 */
export function createLambdaSignal(options: LambdaSignalOptions = {}) {
  const route = signalRoute(nudgingLambdaPlatform(options));
  return async (event: unknown): Promise<HttpApiResult> => {
    if (isHttpEvent(event)) return serveEvent(route, event);
    return refused('not_http', 'the signal function takes HTTP API events');
  };
}

export { CONFIG_VARIABLES, FUNCTION_DEFAULTS, loadConfig, type SkiplockConfig } from './config.js';
export { CONSOLE_LOGIN_THROTTLE, type ConsoleOptions } from './console/index.js';

/** API Gateway HTTP API (payload 2.0) and function URL events, as far as the console reads them. */
export type ConsoleHttpEvent = HttpApiEvent;

export interface ConsoleHttpResult {
  statusCode: number;
  headers: Record<string, string>;
  /** Payload 2.0 sets each as its own Set-Cookie header. */
  cookies: string[];
  body: string;
}

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
 * `GET /admin`, `ANY /admin/{proxy+}` (or a function URL). The client address is the event's
 * sourceIp. An action that went through nudges every worker SKIPLOCK_NUDGE_FUNCTIONS names.
 */
export function createLambdaConsole(jobs: Kinds, options: LambdaConsoleOptions = {}) {
  // The client is the event's sourceIp: proxy headers are never read on Lambda.
  const serve = consoleRoute(jobs, nudgingLambdaPlatform(options), { ...options, trustProxyHeaders: false });
  return async (event: ConsoleHttpEvent): Promise<ConsoleHttpResult> => {
    let request: Request;
    try {
      request = requestOf(event);
    } catch {
      return { statusCode: 400, headers: { 'content-type': 'text/plain' }, cookies: [], body: 'bad request' };
    }
    const response = await serve(request, event.requestContext.http.sourceIp ?? 'unknown');
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      if (name !== 'set-cookie') headers[name] = value;
    });
    return {
      statusCode: response.status,
      headers,
      cookies: response.headers.getSetCookie(),
      body: await response.text(),
    };
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
