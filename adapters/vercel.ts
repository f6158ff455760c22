import type { Clock } from '../core/clock.js';
import type { QueueMetrics } from '../core/metrics.js';
import type { Nudger } from '../core/nudge.js';
import type { Tracing } from '../core/tracing.js';
import type { ConsoleOptions } from './console/index.js';
import type { FunctionRuntime } from './runtime.js';
import { defaultIdleHints } from './vercel-idle.js';
import { createVercelNudger, loadWaitUntil, vercelRouteStarter, type WaitUntil } from './vercel-start.js';
import { type IdleHintStore, IdleHints } from './web/idle.js';
import type { Env, Kinds, NudgeChoices, WorkerChoices } from './web/options.js';
import {
  consoleRoute,
  controlRoute,
  enqueueRoute,
  maintenanceRoute,
  nudgingRoutes,
  replayRoute,
  serve,
  signalRoute,
  type TickPlatform,
  type WebPlatform,
  type WorkerPlatform,
  workerRoute,
} from './web/routes.js';
import { refuseUnfitKinds } from './worker-fit.js';

/**
 * skiplock/vercel: the web core's routes (adapters/web/routes.ts) with Vercel's defaults — the
 * environment from process.env, CRON_SECRET for crons, the function's maxDuration as the budget,
 * `waitUntil` of `@vercel/functions`, idle hints in the Runtime Cache, nudges as requests of the
 * worker routes SKIPLOCK_NUDGE_ROUTES names. A route is a Web `(Request) => Response`.
 */

export interface VercelWorkerOptions extends WorkerChoices {
  /**
   * The function's maxDuration in ms (keep equal to vercel.json): each invocation's budget. A kind of
   * this route's queues whose timeoutMs + SKIPLOCK_SAFETY_MARGIN_MS exceeds it would never run, and is
   * refused with a ConfigError as the route is made. @defaultValue SKIPLOCK_MAX_DURATION_MS
   */
  maxDurationMs?: number;
  /**
   * What this route's invocations are counted under for SKIPLOCK_MAX_INVOCATIONS (Vercel's
   * variables are project-wide, so each worker route gets its own cap by default).
   * @defaultValue SKIPLOCK_WORKER_NAME, else the route's path with dots (`api.reports-worker`)
   */
  name?: string;
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
}
export type RouteHandler = (request: Request) => Promise<Response>;

/**
 * The idle hints of a route: undefined when SKIPLOCK_IDLE is off or there is no store (off Vercel,
 * or `idleHints: false`) — every tick then queries the database.
 */
function idleHintsOf(option: IdleHintStore | false | undefined, idle: boolean, env: Env, runtime: FunctionRuntime) {
  const store = option === undefined ? defaultIdleHints(env) : option;
  if (!idle || !store) return undefined;
  return new IdleHints(store, {
    schema: runtime.config.schema,
    logger: runtime.logger,
    deployment: env.VERCEL_DEPLOYMENT_ID,
  });
}

/** Vercel's crons: CRON_SECRET, the function's maxDuration, the Runtime Cache's hints. */
function vercelTicks(options: { env?: Env; maxDurationMs?: number; idleHints?: IdleHintStore | false }): TickPlatform {
  const env = () => options.env ?? process.env;
  return {
    env,
    secret: 'CRON_SECRET',
    budgetMs: (config) => options.maxDurationMs ?? config.maxDurationMs,
    idleHints: (runtime, idle) => idleHintsOf(options.idleHints, idle, env(), runtime),
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
  const platform: WorkerPlatform = {
    ...vercelTicks(options),
    waitUntil: () => options.waitUntil ?? loadWaitUntil(),
    routeStarter: (url, secret, runtime) =>
      vercelRouteStarter(url, { secret, reason: 'fan-out', logger: runtime.logger, waitUntil: options.waitUntil }),
  };
  return workerRoute(jobs, platform, options).fetch;
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
  return maintenanceRoute(vercelTicks(options), options).fetch;
}

export interface VercelEnqueueOptions extends NudgeChoices {
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

/** Vercel's side of the routes: the environment, the Runtime Cache's marks, who a change is recorded as. */
function vercelPlatform(options: { env?: Env; idleHints?: IdleHintStore | false }): WebPlatform {
  const env = () => options.env ?? process.env;
  return {
    env,
    // Before a write: a tick between the two then cannot trust a hint that missed it.
    markWritten: async (runtime, idle) => {
      await idleHintsOf(options.idleHints, idle, env(), runtime)?.touch(Date.now());
    },
    by: (route) => `vercel:${route}`,
  };
}

/**
 * …and of the routes that write: the instance's nudger (options.nudger, else requests of the worker
 * routes SKIPLOCK_NUDGE_ROUTES names, kept alive by `waitUntil`). Kept apart so that a route that
 * never nudges (control) bundles no nudger.
 */
function nudgingVercelPlatform(options: {
  env?: Env;
  nudger?: Nudger;
  clock?: Clock;
  waitUntil?: WaitUntil;
  idleHints?: IdleHintStore | false;
}): WebPlatform {
  return nudgingRoutes(vercelPlatform(options), {
    nudger: options.nudger,
    async nudgerOf(routes, origin, secret, runtime) {
      // Not installed: the nudger's starts fail, each logged (nudge_failed); the request never does.
      const waitUntil = options.waitUntil ?? (await loadWaitUntil().catch(() => undefined));
      // The routes mark their writes themselves (markWritten).
      const nudgerOptions = { origin, secret, logger: runtime.logger, clock: options.clock, waitUntil };
      return createVercelNudger(routes, { ...nudgerOptions, idleHints: false });
    },
  });
}

/** POST enqueue route (bearer SKIPLOCK_ENQUEUE_TOKEN); nudges the workers of the queues it wrote to. */
export function createVercelEnqueue(jobs: Kinds, options: VercelEnqueueOptions = {}): RouteHandler {
  return serve(enqueueRoute(jobs, nudgingVercelPlatform(options), options));
}

/** The replay and control routes' options. */
export interface VercelAdminOptions {
  /** @defaultValue process.env */
  env?: Env;
  /** Where each call marks its schema written (see VercelEnqueueOptions.idleHints). @defaultValue Vercel's Runtime Cache on Vercel */
  idleHints?: IdleHintStore | false;
}

export interface VercelReplayOptions extends VercelAdminOptions, Omit<NudgeChoices, 'env'> {
  /** Keeps the nudges' requests alive after the response (a Next.js app passes `after`). @defaultValue waitUntil of `@vercel/functions` */
  waitUntil?: WaitUntil;
}

/**
 * POST replay route, protected by SKIPLOCK_ADMIN_TOKEN. The replayed jobs are due at once: it nudges
 * the workers of their queues, as the enqueue route does (on Hobby and previews nothing else would
 * run them soon).
 */
export function createVercelReplay(jobs: Kinds, options: VercelReplayOptions = {}): RouteHandler {
  return serve(replayRoute(jobs, nudgingVercelPlatform(options)));
}

/**
 * POST flow-control route, protected by SKIPLOCK_ADMIN_TOKEN: pause, resume and list
 * (`{ action, queue | kind, reason?, by? }`).
 */
export function createVercelControl(options: VercelAdminOptions = {}): RouteHandler {
  return serve(controlRoute(vercelPlatform(options)));
}

/**
 * POST signal route for callbacks from outside (`?token=`, a token from `createSignalToken`, signed
 * with SKIPLOCK_SIGNAL_SECRET): sends one signal on the token's key, the JSON body as its payload.
 * No bearer token: the signed, expiring, single-use token is the credential. Nudges the workers of
 * the woken jobs' queues as the enqueue route does (SKIPLOCK_NUDGE_ROUTES).
 */
export function createVercelSignal(options: VercelSignalOptions = {}): RouteHandler {
  return signalRoute(nudgingVercelPlatform(options));
}

/** The signal route's options: the enqueue route's, less what only an enqueue uses. */
export type VercelSignalOptions = Omit<VercelEnqueueOptions, 'tracing'>;

export { CONFIG_VARIABLES, FUNCTION_DEFAULTS, loadConfig, type SkiplockConfig } from './config.js';
export { CONSOLE_LOGIN_THROTTLE, type ConsoleOptions } from './console/index.js';
export interface VercelConsoleOptions extends ConsoleOptions, Omit<NudgeChoices, 'env'> {
  /**
   * Where a change made in the console (a replay, a cancel, a resume…) marks the schema written, so
   * that idle cron ticks query the database again (see VercelWorkerOptions.idleHints).
   * @defaultValue Vercel's Runtime Cache on Vercel; none elsewhere
   */
  idleHints?: IdleHintStore | false;
  /** Keeps the nudges' requests alive after the response (a Next.js app passes `after`). @defaultValue waitUntil of `@vercel/functions` */
  waitUntil?: WaitUntil;
}

/**
 * The operator console (`export const GET = createVercelConsole(jobs); export const POST = GET;`),
 * in api/admin.ts with vercel.json rewriting /admin and /admin/:path* to it (the request keeps the
 * browser's URL). The client address is x-real-ip (or x-forwarded-for's first), which Vercel's edge
 * sets — trusted on Vercel or when `trustProxyHeaders` says so (as is x-forwarded-host for the
 * Origin check). A POST (an action, or a login) marks the schema written first, and an action that
 * went through nudges every worker route SKIPLOCK_NUDGE_ROUTES names: a replayed or resumed job
 * runs at once. Also a plain (Request) => Response for any server.
 */
export function createVercelConsole(jobs: Kinds, options: VercelConsoleOptions = {}): RouteHandler {
  const env = options.env ?? process.env;
  const trustProxyHeaders =
    options.trustProxyHeaders ?? (env.VERCEL === '1' || env.SKIPLOCK_CONSOLE_TRUST_PROXY === 'true');
  const serve = consoleRoute(jobs, nudgingVercelPlatform(options), { ...options, trustProxyHeaders });
  return (request) => serve(request);
}
export { resetSharedRuntime } from './runtime.js';
export { type GetRuntimeCache, type RuntimeCacheLike, vercelRuntimeCache } from './vercel-idle.js';
export {
  createVercelNudger,
  MissingVercelFunctionsError,
  type NudgeRoutes,
  START_HEADER,
  VERCEL_START_DEFAULTS,
  type VercelNudgerOptions,
  type VercelStarterOptions,
  vercelRouteStarter,
} from './vercel-start.js';
export { IDLE_DEFAULTS, type IdleHintStore, memoryIdleHints, type WakeHint } from './web/idle.js';
export type { WaitUntil } from './web/start.js';
