import { ConfigError } from '../base/errors.js';
import type { Clock } from '../core/clock.js';
import type { JobDefinition } from '../core/jobs.js';
import type { JobMetrics } from '../core/metrics.js';
import type { Nudger } from '../core/nudge.js';
import type { ScheduleDefinition } from '../core/schedules.js';
import type { Tracing } from '../core/tracing.js';
import type { InvocationStarter } from '../core/worker/index.js';
import type { ConsoleOptions } from './console/index.js';
import {
  createVercelConsole,
  createVercelControl,
  createVercelEnqueue,
  createVercelMaintenance,
  createVercelReplay,
  createVercelSignal,
  createVercelWorker,
  type RouteHandler,
  type WaitUntil,
} from './vercel.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

/**
 * Where a one-script platform (a Cloudflare Worker, a Deno or Supabase function, a Bun server)
 * serves each route. The worker route is also what a nudge or a fan-out requests, and what a
 * scheduler's tick runs.
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
  /** The platform's environment, strings only (bindings and secrets that are text). */
  env: Env;
  /**
   * What one worker or maintenance invocation may take, in ms, from the platform's limits (the
   * adapter works it out): the worker stops claiming so that its last attempt ends within it.
   */
  budgetMs: number;
  /** Keeps the platform's invocation alive after its response (nudges, fan-out, started runs). */
  waitUntil: WaitUntil;
  /** Paths per route; a route set to `false` is not served. @defaultValue PLATFORM_ROUTES */
  routes?: Partial<Record<PlatformRoute, string | false>>;
  /**
   * Put before every route's path: where the platform serves the function (Supabase serves
   * `/functions/v1/skiplock` as `/skiplock`). @defaultValue none
   */
  basePath?: string;
  /** Only these queues (see VercelWorkerOptions.queues). @defaultValue SKIPLOCK_QUEUES, else all */
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
   * How nudges start the worker: the adapter's (a service binding on Cloudflare), else requests of
   * SKIPLOCK_NUDGE_ROUTES at SKIPLOCK_BASE_URL (bearer CRON_SECRET). @defaultValue the latter
   */
  nudger?: Nudger;
  /** How fan-out starts more invocations. @defaultValue requests of the worker route itself */
  fanOut?: InvocationStarter | false;
  /** The console's options (its basePath is routes.console). @defaultValue none */
  console?: Omit<ConsoleOptions, 'env' | 'basePath'>;
}

/** A platform's whole skiplock app: one fetch handler for every route, and a scheduler's entry. */
export interface PlatformApp {
  /** Serves every route by path; 404 (JSON) for any other path. */
  fetch(request: Request): Promise<Response>;
  /**
   * A scheduler's tick (a Cron Trigger, Deno.cron, pg_cron, a scheduled function): runs the worker
   * (or maintenance) as a cron request to its route does, and answers with its summary.
   */
  tick(route: 'worker' | 'maintenance'): Promise<Response>;
}

const notFound = () => Response.json({ error: { code: 'not_found', message: 'no such route' } }, { status: 404 });

/**
 * The routes of skiplock's Web handlers (today the Vercel adapter's, which take a Web Request and
 * answer a Response) behind one fetch handler: what a one-script platform serves. Each platform
 * adapter only works out the environment, the budget and `waitUntil` and calls this.
 */
export function createPlatformApp(jobs: Kinds, options: PlatformAppOptions): PlatformApp {
  const { env, waitUntil, clock, tracing, nudger } = options;
  const prefix = (options.basePath ?? '').replace(/\/+$/, '');
  const paths = Object.fromEntries(
    Object.entries({ ...PLATFORM_ROUTES, ...options.routes }).map(([route, path]) => [
      route,
      path === false ? false : `${prefix}${path}`,
    ]),
  ) as Record<PlatformRoute, string | false>;
  const consolePath = paths.console === false ? undefined : paths.console.replace(/\/+$/, '');
  const handlers = new Map<string, RouteHandler>();
  const add = (route: PlatformRoute, make: () => RouteHandler) => {
    const path = paths[route];
    if (path !== false && route !== 'console') handlers.set(path, make());
  };
  add('worker', () =>
    createVercelWorker(jobs, {
      env,
      maxDurationMs: options.budgetMs,
      queues: options.queues,
      kinds: options.kinds,
      schedules: options.schedules,
      tracing,
      metrics: options.metrics,
      clock,
      fanOut: options.fanOut,
      waitUntil,
      // The idle hints live in Vercel's Runtime Cache; elsewhere every tick queries the database.
      idleHints: false,
    }),
  );
  add('maintenance', () => createVercelMaintenance({ env, maxDurationMs: options.budgetMs, idleHints: false }));
  add('enqueue', () => createVercelEnqueue(jobs, { env, nudger, clock, tracing, waitUntil, idleHints: false }));
  add('replay', () => createVercelReplay(jobs, { env, nudger, clock, waitUntil, idleHints: false }));
  add('control', () => createVercelControl({ env, idleHints: false }));
  add('signal', () => createVercelSignal({ env, nudger, clock, waitUntil, idleHints: false }));
  const consoleRoute =
    consolePath === undefined
      ? undefined
      : createVercelConsole(jobs, {
          ...options.console,
          env,
          basePath: consolePath || '/',
          nudger,
          clock,
          waitUntil,
          idleHints: false,
        });

  const origin = () => {
    const base = env.SKIPLOCK_BASE_URL;
    return base ? new URL(base).origin : 'http://localhost';
  };

  return {
    async fetch(request) {
      const { pathname } = new URL(request.url);
      const handler = handlers.get(pathname.replace(/(.)\/+$/, '$1'));
      if (handler) return handler(request);
      if (consoleRoute && consolePath !== undefined) {
        if (pathname === consolePath || pathname.startsWith(`${consolePath}/`) || consolePath === '') {
          return consoleRoute(request);
        }
      }
      return notFound();
    },
    async tick(route) {
      const path = paths[route];
      if (path === false) throw new ConfigError(`the ${route} route is turned off (routes.${route}: false)`);
      const handler = handlers.get(path) as RouteHandler;
      // A cron request, as the platform's scheduler would send it to the route.
      const headers = env.CRON_SECRET ? { authorization: `Bearer ${env.CRON_SECRET}` } : undefined;
      return handler(new Request(new URL(path, origin()), { headers }));
    },
  };
}
