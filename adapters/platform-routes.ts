import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError } from '../base/errors.js';
import type { InvocationStarter } from '../base/starter.js';
import type { Clock } from '../core/clock.js';
import type { JobMetrics } from '../core/metrics.js';
import type { Nudger } from '../core/nudge.js';
import type { ScheduleDefinition } from '../core/schedules.js';
import type { Tracing } from '../core/tracing.js';
import type { ConsoleOptions } from './console/index.js';
import { publicMessage, sharedRuntime } from './runtime.js';
import { jsonResponse } from './web/http.js';
import type { Env, Kinds } from './web/options.js';
import * as web from './web/routes.js';
import { type RouteFetch, routeNudger, routeStarter, type WaitUntil } from './web/start.js';

/**
 * A one-script platform (a Cloudflare Worker, a Deno or Supabase function, a Netlify function, a
 * Bun server) serving the web core's routes (adapters/web/routes.ts) behind one fetch handler and
 * a scheduler's entry. Its adapter only works out the environment, the budget, how a request is
 * kept alive (`waitUntil`) and who the client is, and calls createPlatformApp.
 */

/**
 * Where a one-script platform serves each route. The worker route is also what a nudge or a
 * fan-out requests, and what a scheduler's tick runs.
 */
export const PLATFORM_ROUTES = {
  worker: '/skiplock/worker',
  maintenance: '/skiplock/maintenance',
  enqueue: '/skiplock/enqueue',
  replay: '/skiplock/replay',
  control: '/skiplock/control',
  signal: '/skiplock/signal',
  console: '/admin',
} as const;
export type PlatformRoute = keyof typeof PLATFORM_ROUTES;

export interface PlatformAppOptions {
  /** Who a change over the replay or control route is recorded as: `<platform>:replay`. */
  platform: string;
  /** The platform's environment, strings only (bindings and secrets that are text). */
  env: Env;
  /**
   * What one worker or maintenance invocation may take, in ms, from the platform's limits (the
   * adapter works it out): the worker stops claiming so that its last attempt ends within it.
   */
  budgetMs: number;
  /**
   * Keeps the platform's invocation alive after its response (nudges, fan-out, started runs) when
   * the request being served brings none of its own (PlatformRequest.waitUntil).
   */
  waitUntil: WaitUntil;
  /** Paths per route; a route set to `false` is not served. @defaultValue PLATFORM_ROUTES */
  routes?: Partial<Record<PlatformRoute, string | false>>;
  /**
   * Put before every route's path: where the platform serves the function (Supabase serves
   * `/functions/v1/skiplock` as `/skiplock`). @defaultValue none
   */
  basePath?: string;
  /** Only these queues (see WorkerChoices.queues). @defaultValue SKIPLOCK_QUEUES, else all */
  queues?: readonly string[];
  /** Only these kinds. @defaultValue SKIPLOCK_KINDS, else all of `jobs` */
  kinds?: readonly string[];
  /** Recurring schedules the worker ticks as each invocation starts. @defaultValue none */
  schedules?: readonly ScheduleDefinition[];
  /** @defaultValue none */
  tracing?: Tracing;
  /** @defaultValue none */
  metrics?: JobMetrics;
  /** @defaultValue the system clock */
  clock?: Clock;
  /**
   * Starts the workers of the queues a write made due. @defaultValue requests of the worker routes
   * SKIPLOCK_NUDGE_ROUTES names (bearer CRON_SECRET), through `self` when it is given, else below
   * SKIPLOCK_BASE_URL (its path included: Supabase's `https://<project>.supabase.co/functions/v1`),
   * else at the origin of the request being served
   */
  nudger?: Nudger;
  /** How fan-out starts more invocations. @defaultValue requests of the worker route itself */
  fanOut?: InvocationStarter | false;
  /**
   * The path fan-out and continuations request instead of the worker route being served: a function
   * that runs the worker longer (Netlify's background function). @defaultValue the worker route's
   */
  fanOutPath?: string;
  /**
   * How the app requests its own routes (nudges, fan-out): `fetch` at `origin` — a Worker's service
   * binding to itself, since a Worker's fetch of its own hostname reaches the origin, not the Worker.
   * A route given as an absolute URL elsewhere is requested with the global fetch. @defaultValue the
   * global fetch, below SKIPLOCK_BASE_URL or at the origin of the request being served
   */
  self?: { fetch: RouteFetch; origin: string };
  /**
   * The client's address, which the console's login throttle counts by, when the platform says it
   * (Cloudflare's `cf-connecting-ip`) and the request being served does not (PlatformRequest.client).
   * @defaultValue x-real-ip / x-forwarded-for when console.trustProxyHeaders, else unknown
   */
  clientOf?(request: Request): string | undefined;
  /** The console's options (its basePath is routes.console). @defaultValue none */
  console?: Omit<ConsoleOptions, 'env' | 'basePath'>;
}

/** What a platform knows of one request (a Worker's `ctx`, a Netlify Function's `context`). */
export interface PlatformRequest {
  /** Keeps this request's invocation alive after its response. @defaultValue the app's `waitUntil` */
  waitUntil?: WaitUntil;
  /** The client's address, as the platform saw it (counted by the console's login throttle). */
  client?: string;
}

/** A platform's whole skiplock app: one fetch handler for every route, and a scheduler's entry. */
export interface PlatformApp {
  /** Serves every route by path; 404 (JSON) for any other path. */
  fetch(request: Request, context?: PlatformRequest): Promise<Response>;
  /**
   * A scheduler's tick (a Cron Trigger, Deno.cron, a scheduled function): runs the worker (or
   * maintenance) as its route would, without a request (no bearer), and answers with its summary.
   */
  tick(route: 'worker' | 'maintenance', context?: PlatformRequest): Promise<Response>;
  /**
   * Starts the workers of these queues now, as the enqueue route does after its write: for jobs your
   * own routes enqueued, after your transaction committed. The routes of SKIPLOCK_NUDGE_ROUTES are
   * requested (coalesced per instance) at SKIPLOCK_BASE_URL, else at the origin of `request`, the one
   * being served (Workers: through the SKIPLOCK_SELF binding). Never throws: a start that fails or
   * cannot be made is logged (`nudge_failed`), and the next tick runs the jobs.
   */
  nudge(queues: readonly string[], request?: Request, context?: PlatformRequest): Promise<void>;
}

const notFound = () => Response.json({ error: { code: 'not_found', message: 'no such route' } }, { status: 404 });

/** The web core's routes behind one fetch handler: what a one-script platform serves. */
export function createPlatformApp(jobs: Kinds, options: PlatformAppOptions): PlatformApp {
  const { env, clock, self } = options;
  const prefix = (options.basePath ?? '').replace(/\/+$/, '');
  const paths = Object.fromEntries(
    Object.entries({ ...PLATFORM_ROUTES, ...options.routes }).map(([route, path]) => [
      route,
      path === false ? false : `${prefix}${path}`,
    ]),
  ) as Record<PlatformRoute, string | false>;

  // The request being served: what keeps its work alive, who its client is.
  const current = new AsyncLocalStorage<PlatformRequest>();
  const waitUntil: WaitUntil = (promise) => (current.getStore()?.waitUntil ?? options.waitUntil)(promise);
  const send: RouteFetch | undefined =
    self && ((url, init) => (url.origin === self.origin ? self.fetch(url, init) : fetch(url, init)));

  const platform: web.WebPlatform = { env: () => env, by: (route) => `${options.platform}:${route}` };
  const nudging = web.nudgingRoutes(platform, {
    nudger: options.nudger,
    origin: self?.origin,
    // The function sees the paths below SKIPLOCK_BASE_URL's (Supabase strips /functions/v1).
    belowBasePath: true,
    nudgerOf: (routes, origin, secret, runtime) =>
      routeNudger(routes, {
        origin,
        secret,
        logger: runtime.logger,
        clock,
        waitUntil,
        loadWaitUntil: () => waitUntil,
        fetch: send,
      }),
  });
  const ticks: web.TickPlatform = { env: () => env, secret: 'CRON_SECRET', budgetMs: () => options.budgetMs };
  const { queues, kinds, schedules, tracing, metrics, fanOut } = options;
  const worker = web.workerRoute(
    jobs,
    {
      ...ticks,
      waitUntil: () => waitUntil,
      origin: self?.origin,
      belowBasePath: true,
      fanOutPath: options.fanOutPath,
      routeStarter: (url, secret, runtime) =>
        routeStarter(url, {
          secret,
          reason: 'fan-out',
          logger: runtime.logger,
          waitUntil: () => waitUntil,
          fetch: send,
        }),
    },
    { queues, kinds, schedules, tracing, metrics, clock, fanOut },
  );
  const maintenance = web.maintenanceRoute(ticks);
  const routes: Record<Exclude<PlatformRoute, 'console'>, web.WebRoute> = {
    worker: worker.fetch,
    maintenance: maintenance.fetch,
    enqueue: web.serve(web.enqueueRoute(jobs, nudging, { tracing })),
    replay: web.serve(web.replayRoute(jobs, nudging)),
    control: web.serve(web.controlRoute(platform)),
    signal: web.signalRoute(nudging),
  };
  const handlers = new Map<string, web.WebRoute>();
  for (const [route, handler] of Object.entries(routes)) {
    const path = paths[route as PlatformRoute];
    if (path !== false) handlers.set(path, handler);
  }
  const consolePath = paths.console === false ? undefined : paths.console.replace(/\/+$/, '');
  const baseUrl = () => {
    try {
      return new URL(env.SKIPLOCK_BASE_URL ?? '');
    } catch {
      return undefined;
    }
  };
  const trustProxyHeaders = options.console?.trustProxyHeaders ?? env.SKIPLOCK_CONSOLE_TRUST_PROXY === 'true';
  // Browsers reach the console below SKIPLOCK_BASE_URL's path, which the gateway strips (Supabase).
  const gatewayPath = baseUrl()?.pathname.replace(/\/+$/, '') ?? '';
  const serveConsole =
    consolePath === undefined
      ? undefined
      : web.consoleRoute(jobs, nudging, {
          ...options.console,
          basePath: consolePath || '/',
          gatewayPath,
          trustProxyHeaders,
        });
  const inConsole = (pathname: string) =>
    consolePath === '' || pathname === consolePath || pathname.startsWith(`${consolePath}/`);

  // Where a scheduler's tick stands: its route on SKIPLOCK_BASE_URL (what a fan-out requests).
  // A malformed one is left to the worker's settings, which report it as configuration.
  const origin = () => baseUrl()?.origin ?? 'http://localhost';

  return {
    fetch(request, context = {}) {
      return current.run(context, async () => {
        const { pathname } = new URL(request.url);
        const handler = handlers.get(pathname.replace(/(.)\/+$/, '$1'));
        if (handler) return handler(request);
        if (serveConsole && inConsole(pathname)) {
          return serveConsole(request, context.client ?? options.clientOf?.(request));
        }
        return notFound();
      });
    },
    nudge(queues, request, context = {}) {
      return current.run(context, async () => {
        const runtime = sharedRuntime(env);
        try {
          const nudger = await nudging.nudger?.(runtime, request && new URL(request.url));
          if (!nudger) {
            const routes = runtime.settings.require('enqueue').nudgeRoutes;
            throw new ConfigError(
              routes
                ? 'no address to request the worker route at: set SKIPLOCK_BASE_URL, or pass the request being served'
                : 'SKIPLOCK_NUDGE_ROUTES is unset: no worker route to start',
            );
          }
          await nudger.nudge(queues);
        } catch (err) {
          runtime.logger.warn('nudge_failed', { queues, error: publicMessage(err) });
        }
      });
    },
    tick(route, context = {}) {
      return current.run(context, async () => {
        const path = paths[route];
        if (path === false) throw new ConfigError(`the ${route} route is turned off (routes.${route}: false)`);
        const entries = route === 'worker' ? worker : maintenance;
        return jsonResponse(await entries.scheduled(new URL(path, origin())));
      });
    },
  };
}
