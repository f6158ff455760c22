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
import { createVercelConsole as consoleRoute } from './console/platforms.js';
import { controlFromBody } from './control.js';
import {
  errorResponse,
  type HttpRequest,
  type HttpResponse,
  readJson,
  readOptionalJson,
  readWebBody,
  requireBearer,
} from './http.js';
import {
  DeployedWorker,
  enqueueFromBody,
  replayFromBody,
  runMaintenanceTick,
  signalFromToken,
  type WorkerRun,
} from './operations.js';
import { type FunctionRuntime, publicMessage, sharedRuntime } from './runtime.js';
import { defaultIdleHints, hintAfterRun, type IdleHintStore, IdleHints } from './vercel-idle.js';
import {
  createVercelNudger,
  loadWaitUntil,
  routeUrl,
  START_HEADER,
  START_REASONS,
  type StartReason,
  vercelRouteStarter,
  type WaitUntil,
} from './vercel-start.js';
import { refuseUnfitKinds } from './worker-fit.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

export interface VercelWorkerOptions {
  env?: Env;
  /**
   * The function's maxDuration in ms (keep equal to vercel.json): each invocation's budget. A kind of
   * this route's queues whose timeoutMs + SKIPLOCK_SAFETY_MARGIN_MS exceeds it would never run, and is
   * refused with a ConfigError as the route is made. @defaultValue SKIPLOCK_MAX_DURATION_MS
   */
  maxDurationMs?: number;
  /**
   * Only these queues, e.g. a route for slow reports; wins over SKIPLOCK_QUEUES (Vercel's variables
   * are project-wide, so a route dedicated to some queues names them here).
   * @defaultValue SKIPLOCK_QUEUES, else all
   */
  queues?: readonly string[];
  /** Only these kinds; wins over SKIPLOCK_KINDS. @defaultValue SKIPLOCK_KINDS, else all of `jobs` */
  kinds?: readonly string[];
  /** The invocation's clock (tests). @defaultValue the system clock */
  clock?: Clock;
  /**
   * What this route's invocations are counted under for SKIPLOCK_MAX_INVOCATIONS (Vercel's
   * variables are project-wide, so each worker route gets its own cap by default).
   * @defaultValue SKIPLOCK_WORKER_NAME, else the route's path with dots (`api.reports-worker`)
   */
  name?: string;
  /**
   * How more invocations start when SKIPLOCK_MAX_INVOCATIONS is set and the backlog needs them:
   * `false` turns fan-out off (the cap still holds). @defaultValue requests of this route itself
   * (bearer CRON_SECRET) at SKIPLOCK_BASE_URL, else at the origin this request came to
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
   * Keeps the function alive after a started request's 202 while its invocation runs, and after a
   * fan-out's requests. In a Next.js app pass `after` from `next/server`. @defaultValue waitUntil of
   * `@vercel/functions` (an optional peer, loaded on first use)
   */
  waitUntil?: WaitUntil;
  /**
   * Where idle ticks keep when this worker next has something to do, so that a cron tick with
   * nothing due answers without the database (SKIPLOCK_IDLE; docs/deploy-vercel.md, "Idle ticks").
   * A Next.js app passes `vercelRuntimeCache({ getCache })`; an app in several regions, a store they
   * all share; `false`: every tick queries the database. @defaultValue Vercel's Runtime Cache on
   * Vercel (`@vercel/functions`, loaded on first use); none elsewhere
   */
  idleHints?: IdleHintStore | false;
  /**
   * Tests only: the time the idle checks and the worker's statements use instead of the clocks
   * (WorkerOptions.test). @defaultValue the system's and the database's
   */
  test?: { now?: () => Date };
}
export type RouteHandler = (request: Request) => Promise<Response>;

function fromWebRequest(request: Request): HttpRequest {
  return {
    method: request.method.toUpperCase(),
    header: (name) => request.headers.get(name) ?? undefined,
    readBody: (maxBytes) => readWebBody(request, maxBytes),
  };
}

function toWebResponse(response: HttpResponse): Response {
  return Response.json(response.body, { status: response.status });
}

/** Wraps a route: any failure becomes a JSON error response, never a stack. */
function route(handle: (request: HttpRequest, url: URL) => Promise<HttpResponse>): RouteHandler {
  return async (request) => {
    try {
      return toWebResponse(await handle(fromWebRequest(request), new URL(request.url)));
    } catch (err) {
      return toWebResponse(errorResponse(err));
    }
  };
}

const LABEL = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

/** `/api/reports-worker` → `api.reports-worker` (a worker name); undefined when it cannot be one. */
function nameOfRoute(pathname: string): string | undefined {
  const name = pathname.replace(/^\/+|\/+$/g, '').replaceAll('/', '.');
  return LABEL.test(name) ? name : undefined;
}

function startReasonOf(header: string | undefined): StartReason | undefined {
  return START_REASONS.find((reason) => reason === header);
}

/** The wall time of a route's idle checks and marks: the test's, else the system's. */
function wallClock(test: { now?: () => Date } | undefined): () => number {
  return () => test?.now?.().getTime() ?? Date.now();
}

/**
 * The idle hints of a route: undefined when SKIPLOCK_IDLE is off or there is no store (off Vercel,
 * or `idleHints: false`) — every tick then queries the database.
 */
function idleHintsOf(
  option: IdleHintStore | false | undefined,
  idle: boolean,
  env: Env,
  runtime: FunctionRuntime,
): IdleHints | undefined {
  const store = option === undefined ? defaultIdleHints(env) : option;
  if (!idle || !store) return undefined;
  return new IdleHints(store, {
    schema: runtime.config.schema,
    logger: runtime.logger,
    deployment: env.VERCEL_DEPLOYMENT_ID,
  });
}

const isoOf = (ms: number) => new Date(ms).toISOString();

/**
 * How the worker fans out: the option, else requests of this route itself, at SKIPLOCK_BASE_URL or
 * the origin the request came to — one starter per target and secret, so that the instance's
 * worker is built once for each (see DeployedWorker).
 */
function fanOutStarters(option: InvocationStarter | false | undefined, waitUntil: WaitUntil | undefined) {
  let own: { key: string; starter: InvocationStarter } | undefined;
  return (runtime: FunctionRuntime, url: URL, secret: string | undefined): InvocationStarter | undefined => {
    if (option === false) return undefined;
    if (option) return option;
    const target = routeUrl(url.pathname, runtime.settings.require('worker').baseUrl ?? url.origin);
    // Kept in memory only: a changed secret or origin gets a new starter.
    const key = JSON.stringify([target.href, secret ?? null]);
    if (own?.key !== key) {
      own = {
        key,
        starter: vercelRouteStarter(target, { secret, reason: 'fan-out', logger: runtime.logger, waitUntil }),
      };
    }
    return own.starter;
  };
}

/**
 * Vercel cron → worker invocation. Vercel calls crons with GET and
 * `Authorization: Bearer $CRON_SECRET`; the budget is `maxDurationMs` (keep it equal to the
 * function's maxDuration in vercel.json), else SKIPLOCK_MAX_DURATION_MS; a kind that could never fit
 * it is a ConfigError here, as the route is made. A request that a nudge or
 * a fan-out sent (START_HEADER) is accepted at once with 202, and its invocation runs after the
 * response, kept alive with `waitUntil`; a cron's answers with the summary when it is done. The
 * worker is made once per warm instance and kept across the requests it serves.
 */
export function createVercelWorker(jobs: Kinds, options: VercelWorkerOptions = {}): RouteHandler {
  refuseUnfitKinds(
    jobs,
    options.env ?? process.env,
    options,
    (config) => options.maxDurationMs ?? config.maxDurationMs,
  );
  const worker = new DeployedWorker(jobs);
  const fanOutOf = fanOutStarters(options.fanOut, options.waitUntil);
  return route(async (request, url) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.CRON_SECRET, 'CRON_SECRET');
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('worker');
    const { queues, kinds, clock, schedules, tracing, metrics, drizzle } = options;
    const run: WorkerRun = {
      remainingMs: options.maxDurationMs ?? config.maxDurationMs,
      queues,
      kinds,
      clock,
      schedules,
      tracing,
      metrics,
      drizzle,
      name: options.name ?? (env.SKIPLOCK_WORKER_NAME ? undefined : nameOfRoute(url.pathname)),
      fanOut: config.maxInvocations === undefined ? undefined : fanOutOf(runtime, url, env.CRON_SECRET),
    };
    const reason = startReasonOf(request.header(START_HEADER));
    const hints = idleHintsOf(options.idleHints, config.idle, env, runtime);
    const now = wallClock(options.test);
    const key = hints?.keyOf({ worker: run.name ?? config.workerName });
    let woke: string | undefined;
    if (hints && key && !reason) {
      // A cron tick: nothing due, nothing written since the hint → answer without the database (no
      // connection is made). A started request always queries: it was sent because of a write.
      const check = await hints.check(key, now(), config.idleRecheckMs);
      if (check.skip) {
        const { wakeAt, computedAt } = check.hint;
        const recheckAt = computedAt + config.idleRecheckMs;
        return {
          status: 200,
          body: { idle: true, wakeAt: isoOf(Math.min(wakeAt, recheckAt)), computedAt: isoOf(computedAt) },
        };
      }
      woke = check.reason;
    }
    const invoke = async () => {
      const computedAt = now();
      const summary = await worker.run(runtime, { ...run, nextDue: hints !== undefined, test: options.test });
      if (hints && key) {
        // Work done makes maintenance due, and other routes' hints untrusted: a handler may have
        // enqueued to their queues without a nudge.
        if (summary.claimed > 0) await hints.touch(now());
        await hints.record(
          key,
          hintAfterRun(computedAt, now(), summary.nextDueAt, config.idleRecheckMs),
          config.idleRecheckMs,
        );
      }
      return summary;
    };
    if (!reason) {
      // A failed invocation (the database unreachable, a statement refused) is a failure to the
      // platform too: 503, so cron dashboards and uptime checks see it; the body is the summary.
      const summary = await invoke();
      const body = woke ? { ...summary, woke } : { ...summary };
      return { status: summary.stoppedBecause === 'error' ? 503 : 200, body };
    }
    const waitUntil = options.waitUntil ?? (await loadWaitUntil());
    const invocation = invoke().catch((err: unknown) => {
      runtime.logger.error('worker_failed', { error: publicMessage(err) });
    });
    waitUntil(invocation);
    return { status: 202, body: { accepted: true, start: reason } };
  });
}

export interface VercelMaintenanceOptions {
  /** @defaultValue process.env */
  env?: Env;
  /** The function's maxDuration in ms. @defaultValue SKIPLOCK_MAX_DURATION_MS */
  maxDurationMs?: number;
  /** Queue depth and breaker states for each tick (`otelMetrics()`). @defaultValue none */
  metrics?: QueueMetrics;
  /** Where idle ticks keep their hints (see VercelWorkerOptions.idleHints). @defaultValue Vercel's Runtime Cache on Vercel */
  idleHints?: IdleHintStore | false;
  /** Tests only: the time the idle checks use. @defaultValue the system's */
  test?: { now?: () => Date };
}

/**
 * Vercel cron → maintenance tick (CRON_SECRET). With idle hints, a quiet tick (nothing changed,
 * nothing ready or running) lets the next ticks answer without the database until a write or a
 * worker that did work marks the schema, or the recheck comes.
 */
export function createVercelMaintenance(options: VercelMaintenanceOptions = {}): RouteHandler {
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.CRON_SECRET, 'CRON_SECRET');
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('maintenance');
    const budget = options.maxDurationMs ?? config.maxDurationMs;
    const hints = idleHintsOf(options.idleHints, config.idle, env, runtime);
    const now = wallClock(options.test);
    const key = hints?.keyOf('maintenance');
    let woke: string | undefined;
    if (hints && key) {
      const check = await hints.check(key, now(), config.idleRecheckMs);
      if (check.skip) {
        const wakeAt = check.hint.computedAt + config.idleRecheckMs;
        return { status: 200, body: { idle: true, wakeAt: isoOf(wakeAt), computedAt: isoOf(check.hint.computedAt) } };
      }
      woke = check.reason;
    }
    const computedAt = now();
    const report = await runMaintenanceTick(runtime, budget, false, options.metrics);
    if (hints && key) {
      const hint = hintAfterRun(computedAt, now(), report.quiet ? null : undefined, config.idleRecheckMs);
      await hints.record(key, hint, config.idleRecheckMs);
    }
    return { status: 200, body: woke ? { ...report, woke } : { ...report } };
  });
}

export interface VercelEnqueueOptions {
  /** @defaultValue process.env */
  env?: Env;
  /**
   * Starts the workers of the enqueued jobs' queues after each enqueue. @defaultValue requests
   * of the worker routes SKIPLOCK_NUDGE_ROUTES names (bearer CRON_SECRET), at SKIPLOCK_BASE_URL,
   * else at the origin this request came to; none when unset
   */
  nudger?: Nudger;
  /** The nudges' clock (tests: the coalescing window). @defaultValue the system clock */
  clock?: Clock;
  /** A producer span around each enqueue, its context stored with the jobs (`otelTracing()`). @defaultValue none */
  tracing?: Tracing;
  /**
   * Keeps the function alive after its response until the nudges' requests are accepted. In a
   * Next.js app pass `after` from `next/server`. @defaultValue waitUntil of `@vercel/functions`
   * (an optional peer, loaded on first use; without it every nudge fails, logged)
   */
  waitUntil?: WaitUntil;
  /**
   * Where each write marks its schema written, so that idle ticks query the database again (see
   * VercelWorkerOptions.idleHints). @defaultValue Vercel's Runtime Cache on Vercel; none elsewhere
   */
  idleHints?: IdleHintStore | false;
}

/**
 * The nudger of a route's instance (options.nudger, else requests of the worker routes
 * SKIPLOCK_NUDGE_ROUTES names): one per instance, so that nudges coalesce across the requests it serves.
 */
function vercelNudgers(options: {
  nudger?: Nudger;
  clock?: Clock;
  waitUntil?: WaitUntil;
}): (runtime: FunctionRuntime, env: Env, url: URL) => Promise<Nudger | undefined> {
  let nudgerFor: { key: string; nudger: Nudger } | undefined;
  return async (runtime, env, url) => {
    if (options.nudger) return options.nudger;
    const { nudgeRoutes, baseUrl } = runtime.settings.require('enqueue');
    if (!nudgeRoutes) return undefined;
    const origin = baseUrl ?? url.origin;
    // Kept in memory only: a changed secret or origin gets a new nudger.
    const key = JSON.stringify([nudgeRoutes, origin, env.CRON_SECRET ?? null]);
    if (nudgerFor?.key !== key) {
      // Not installed: the nudger's starts fail, each logged (nudge_failed); the request never does.
      const waitUntil = options.waitUntil ?? (await loadWaitUntil().catch(() => undefined));
      nudgerFor = {
        key,
        nudger: createVercelNudger(nudgeRoutes, {
          origin,
          secret: env.CRON_SECRET,
          logger: runtime.logger,
          clock: options.clock,
          waitUntil,
          // The route marks its writes itself (markWritten).
          idleHints: false,
        }),
      };
    }
    return nudgerFor.nudger;
  };
}

/**
 * Marks the schema written before a write (replay, control) or after one (a signal), so that idle
 * ticks query the database again; bounded, never failing the request. Before the write: a tick
 * between the two then cannot trust a hint that missed it.
 */
async function markWritten(option: IdleHintStore | false | undefined, idle: boolean, env: Env): Promise<void> {
  const runtime = sharedRuntime(env);
  await idleHintsOf(option, idle, env, runtime)?.touch(Date.now());
}

/** POST enqueue route (bearer SKIPLOCK_ENQUEUE_TOKEN); nudges the workers of the queues it wrote to. */
export function createVercelEnqueue(jobs: Kinds, options: VercelEnqueueOptions = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  const nudgerOf = vercelNudgers(options);
  return route(async (request, url) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.SKIPLOCK_ENQUEUE_TOKEN, 'SKIPLOCK_ENQUEUE_TOKEN');
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('enqueue');
    const body = await readJson(request, config.maxBodyBytes);
    const nudger = await nudgerOf(runtime, env, url);
    await markWritten(options.idleHints, config.idle, env);
    return { status: 200, body: await enqueueFromBody(runtime, registry, body, nudger, options.tracing) };
  });
}

/** The replay and control routes' options. */
export interface VercelAdminOptions {
  /** @defaultValue process.env */
  env?: Env;
  /** Where each call marks its schema written (see VercelEnqueueOptions.idleHints). @defaultValue Vercel's Runtime Cache on Vercel */
  idleHints?: IdleHintStore | false;
}

export interface VercelReplayOptions extends VercelAdminOptions {
  /** Starts the workers of the replayed jobs' queues (see VercelEnqueueOptions.nudger). @defaultValue requests of SKIPLOCK_NUDGE_ROUTES */
  nudger?: Nudger;
  /** The nudges' clock (tests). @defaultValue the system clock */
  clock?: Clock;
  /** Keeps the nudges' requests alive after the response (a Next.js app passes `after`). @defaultValue waitUntil of `@vercel/functions` */
  waitUntil?: WaitUntil;
}

/**
 * POST replay route, protected by SKIPLOCK_ADMIN_TOKEN. The replayed jobs are due at once: it nudges
 * the workers of their queues, as the enqueue route does (on Hobby and previews nothing else would
 * run them soon).
 */
export function createVercelReplay(jobs: Kinds, options: VercelReplayOptions = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  const nudgerOf = vercelNudgers(options);
  return route(async (request, url) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.SKIPLOCK_ADMIN_TOKEN, 'SKIPLOCK_ADMIN_TOKEN');
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('replay');
    const body = await readJson(request, config.maxBodyBytes);
    await markWritten(options.idleHints, config.idle, env);
    const result = await replayFromBody(runtime, registry, body, 'vercel:replay');
    const queues = [...new Set(result.replayed.map((job) => job.queue))];
    if (!result.dryRun && queues.length > 0) {
      // A nudge is never the replay's failure: a setting the nudger needs that is wrong leaves it out.
      const nudger = await nudgerOf(runtime, env, url).catch(() => undefined);
      await nudger?.nudge(queues);
    }
    return { status: 200, body: { ...result } };
  });
}

/**
 * POST flow-control route, protected by SKIPLOCK_ADMIN_TOKEN: pause, resume and list
 * (`{ action, queue | kind, reason?, by? }`).
 */
export function createVercelControl(options: VercelAdminOptions = {}): RouteHandler {
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.SKIPLOCK_ADMIN_TOKEN, 'SKIPLOCK_ADMIN_TOKEN');
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('replay');
    const body = await readJson(request, config.maxBodyBytes);
    // A resume frees held work; a pause or a list costs at most a tick or two of queries.
    await markWritten(options.idleHints, config.idle, env);
    return { status: 200, body: { ...(await controlFromBody(runtime, body, 'vercel:control')) } };
  });
}

/**
 * POST signal route for callbacks from outside (`?token=`, a token from `createSignalToken`, signed
 * with SKIPLOCK_SIGNAL_SECRET): sends one signal on the token's key, the JSON body as its payload.
 * No bearer token: the signed, expiring, single-use token is the credential. Nudges the workers of
 * the woken jobs' queues as the enqueue route does (SKIPLOCK_NUDGE_ROUTES).
 */
export function createVercelSignal(options: VercelSignalOptions = {}): RouteHandler {
  const nudgerOf = vercelNudgers(options);
  return route(async (request, url) => {
    const env = options.env ?? process.env;
    const runtime = sharedRuntime(env);
    const token = url.searchParams.get('token') ?? undefined;
    const read = (maxBytes: number) => readOptionalJson(request, maxBytes);
    const nudger = await nudgerOf(runtime, env, url);
    const result = await signalFromToken(runtime, env.SKIPLOCK_SIGNAL_SECRET, token, read, nudger);
    // After the signal: the token is the credential, checked inside. A woken job waits at most one
    // more tick if a tick read its hint between the commit and the mark; the nudge starts it first.
    if (result.signal.queues.length > 0) {
      await markWritten(options.idleHints, runtime.settings.require('enqueue').idle, env);
    }
    return { status: 200, body: result };
  });
}

/** The signal route's options: the enqueue route's, less what only an enqueue uses. */
export type VercelSignalOptions = Omit<VercelEnqueueOptions, 'tracing'>;

export { CONFIG_VARIABLES, FUNCTION_DEFAULTS, loadConfig, type SkiplockConfig } from './config.js';
export { CONSOLE_LOGIN_THROTTLE, type ConsoleOptions } from './console/index.js';
export interface VercelConsoleOptions extends ConsoleOptions {
  /**
   * Where a change made in the console (a replay, a cancel, a resume…) marks the schema written, so
   * that idle cron ticks query the database again (see VercelWorkerOptions.idleHints).
   * @defaultValue Vercel's Runtime Cache on Vercel; none elsewhere
   */
  idleHints?: IdleHintStore | false;
  /**
   * Starts the worker routes after each action (a replayed or resumed job runs at once, not at the
   * next tick: a day away on Hobby). @defaultValue requests of every route SKIPLOCK_NUDGE_ROUTES names
   */
  nudger?: Nudger;
  /** The nudges' clock (tests). @defaultValue the system clock */
  clock?: Clock;
  /** Keeps the nudges' requests alive after the response (a Next.js app passes `after`). @defaultValue waitUntil of `@vercel/functions` */
  waitUntil?: WaitUntil;
}

/**
 * The operator console (`export const GET = createVercelConsole(jobs); export const POST = GET;`).
 * A POST (an action, or a login) marks the schema written first, and an action that went through
 * nudges every worker route SKIPLOCK_NUDGE_ROUTES names: a replayed or resumed job runs at once.
 */
export function createVercelConsole(jobs: Kinds, options: VercelConsoleOptions = {}): RouteHandler {
  const handle = consoleRoute(jobs, options);
  const nudgerOf = vercelNudgers(options);
  return async (request) => {
    if (request.method.toUpperCase() !== 'POST') return handle(request);
    const env = options.env ?? process.env;
    // A setting the console cannot read is the console's to answer (it says which one).
    const runtime = (() => {
      try {
        return sharedRuntime(env);
      } catch {
        return undefined;
      }
    })();
    const idle = (() => {
      try {
        return runtime?.settings.require('console').idle ?? false;
      } catch {
        return false;
      }
    })();
    if (idle) await markWritten(options.idleHints, idle, env);
    const response = await handle(request);
    const url = new URL(request.url);
    if (runtime && response.status < 400 && url.pathname.endsWith('/actions')) {
      // Which queues an action touched is the console's business: wake every route (a nudge with
      // nothing to do costs one short invocation).
      const nudger = await nudgerOf(runtime, env, url).catch(() => undefined);
      const routes = (() => {
        try {
          return runtime.settings.require('enqueue').nudgeRoutes;
        } catch {
          return undefined;
        }
      })();
      await nudger?.nudge(routes ? Object.keys(routes) : ['*']);
    }
    return response;
  };
}
export { resetSharedRuntime } from './runtime.js';
export {
  type GetRuntimeCache,
  IDLE_DEFAULTS,
  type IdleHintStore,
  memoryIdleHints,
  type RuntimeCacheLike,
  vercelRuntimeCache,
  type WakeHint,
} from './vercel-idle.js';
export {
  createVercelNudger,
  MissingVercelFunctionsError,
  type NudgeRoutes,
  START_HEADER,
  VERCEL_START_DEFAULTS,
  type VercelNudgerOptions,
  type VercelStarterOptions,
  vercelRouteStarter,
  type WaitUntil,
} from './vercel-start.js';
