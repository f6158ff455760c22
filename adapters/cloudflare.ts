import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError } from '../base/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import type { JobDefinition } from '../core/jobs.js';
import { createNudger, type Nudger } from '../core/nudge.js';
import type { InvocationStarter } from '../core/worker/index.js';
import { EnvironmentSettings } from './config.js';
import { createPlatformApp, PLATFORM_ROUTES, type PlatformApp, type PlatformAppOptions } from './platform-routes.js';
import { sharedRuntime } from './runtime.js';
import { START_HEADER, type WaitUntil } from './vercel-start.js';
import { MIN_SECRET_LENGTH } from './web/http.js';
import { refuseUnfitKinds } from './worker-fit.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];

/** What skiplock uses of a Worker's `ctx` (ExecutionContext). */
export interface CloudflareContext {
  waitUntil(promise: Promise<unknown>): void;
}
/** What skiplock uses of a Cron Trigger's controller (ScheduledController). */
export interface CloudflareScheduledController {
  readonly cron: string;
  readonly scheduledTime: number;
}
/** A service binding (Fetcher): `[[services]] binding = "SKIPLOCK_SELF", service = "<this worker>"`. */
export interface CloudflareServiceBinding {
  fetch(request: Request): Promise<Response>;
}
/** A Worker's env: text variables and secrets, and bindings (objects), which skiplock ignores but one. */
export type CloudflareEnv = Record<string, unknown>;

/**
 * Cloudflare's limits that bound an invocation (developers.cloudflare.com/workers/platform/limits):
 * CPU time 30 s by default on the Paid plan (`limits.cpu_ms` raises it to 5 min; the Free plan's
 * 10 ms cannot run a worker), and the wall time a started run gets after its response through
 * `waitUntil` (30 s). A Cron Trigger may run up to 15 min of wall time, but the same worker route
 * serves nudges too, so one budget fits both.
 */
export const CLOUDFLARE_LIMITS = { cpuMs: 30_000, waitUntilMs: 30_000, minCpuMs: 1_000 } as const;

/** The drivers that hold on Workers, and why the others are refused. */
export const CLOUDFLARE_DRIVERS = {
  'neon-http': undefined,
  'neon-ws':
    'neon-ws keeps a WebSocket pool across requests, and Workers forbid one request to use I/O ' +
    'objects another request opened: set SKIPLOCK_DRIVER=neon-http (Neon HTTP, or Hyperdrive is not ' +
    'needed: one fetch per statement)',
  pg:
    'node-postgres keeps a TCP pool across requests, and Workers forbid one request to use sockets ' +
    'another request opened (cloudflare:sockets, Hyperdrive): set SKIPLOCK_DRIVER=neon-http',
} as const satisfies Record<string, string | undefined>;

export interface CloudflareWorkerOptions
  extends Omit<PlatformAppOptions, 'env' | 'budgetMs' | 'waitUntil' | 'nudger' | 'fanOut'> {
  /**
   * The Worker's CPU time limit in ms (wrangler's `limits.cpu_ms`). The budget of each worker and
   * maintenance invocation is the smaller of it and the 30 s a started run gets after its response:
   * CPU time never exceeds wall time in a single-threaded isolate, so a wall-time budget within the
   * CPU limit bounds both. @defaultValue 30000 (Cloudflare's default on the Paid plan)
   */
  cpuMs?: number;
  /**
   * The Cron Trigger (as written in wrangler's `triggers.crons`) whose ticks run maintenance; every
   * other cron runs the worker. @defaultValue none: every cron runs the worker
   */
  maintenanceCron?: string;
  /**
   * The service binding to this Worker itself through which nudges and fan-out request the worker
   * route (a Worker's fetch of its own hostname goes to the origin, not to the Worker).
   * @defaultValue the binding SKIPLOCK_SELF when there is one, else requests at SKIPLOCK_BASE_URL
   */
  selfBinding?: string;
}

/** The Worker's module: `export default createCloudflareWorker(jobs, { schedules })`. */
export interface CloudflareWorker {
  fetch(request: Request, env: CloudflareEnv, ctx: CloudflareContext): Promise<Response>;
  scheduled(controller: CloudflareScheduledController, env: CloudflareEnv, ctx: CloudflareContext): Promise<void>;
}

/** The Worker's text variables and secrets; the driver defaults to neon-http, the only one that holds. */
function textEnv(env: CloudflareEnv): Record<string, string | undefined> {
  const text: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(env)) if (typeof value === 'string') text[name] = value;
  text.SKIPLOCK_DRIVER ??= 'neon-http';
  return text;
}

/** A driver that cannot hold on Workers is a ConfigError before any statement is sent. */
export function assertCloudflareDriver(env: Record<string, string | undefined>): void {
  const driver = env.SKIPLOCK_DRIVER ?? 'neon-http';
  const refusal = (CLOUDFLARE_DRIVERS as Record<string, string | undefined>)[driver];
  if (refusal !== undefined)
    throw new ConfigError(`SKIPLOCK_DRIVER=${driver} cannot run on Cloudflare Workers: ${refusal}`);
}

/**
 * Starts the worker route through a service binding: each start is handed to `waitUntil`, so the
 * caller answers at once; a refused or failed start is logged, and the cron tick stays the safety net.
 */
function bindingStarter(
  binding: CloudflareServiceBinding,
  path: string,
  secret: string | undefined,
  reason: 'nudge' | 'fan-out',
  waitUntil: WaitUntil,
  warn: (event: string, fields: Record<string, unknown>) => void,
): InvocationStarter {
  const failure = reason === 'nudge' ? 'nudge_failed' : 'fan_out_failed';
  const deliver = async () => {
    try {
      const request = new Request(new URL(path, 'https://skiplock.internal'), {
        headers: { authorization: `Bearer ${secret}`, [START_HEADER]: reason },
      });
      const response = await binding.fetch(request);
      await response.body?.cancel().catch(() => {});
      if (!response.ok) warn(failure, { route: path, status: response.status });
    } catch (err) {
      warn(failure, { route: path, error: (err as Error).name ?? 'Error' });
    }
  };
  return {
    async start(count) {
      if (!secret || secret.length < MIN_SECRET_LENGTH) {
        throw new Error(`CRON_SECRET must be set (at least ${MIN_SECRET_LENGTH} characters) to start ${path}`);
      }
      for (let i = 0; i < count; i++) waitUntil(deliver());
    },
  };
}

/**
 * A clock whose timers keep the request that set them alive until they fire: the nudger's one more
 * start at the end of its coalescing window must not be lost when the isolate goes idle.
 */
function keptAlive(clock: Clock = systemClock, waitUntil: WaitUntil): Clock {
  return {
    now: () => clock.now(),
    setTimer(fn, ms) {
      let fired!: () => void;
      waitUntil(
        new Promise<void>((resolve) => {
          fired = resolve;
        }),
      );
      const cancel = clock.setTimer(() => {
        try {
          fn();
        } finally {
          fired();
        }
      }, ms);
      return () => {
        cancel();
        fired();
      };
    },
  };
}

/**
 * A Cloudflare Worker serving skiplock: `fetch` serves every route (PLATFORM_ROUTES: the worker,
 * maintenance, enqueue, replay, control, signal and the console at /admin) and `scheduled` runs the
 * worker on each Cron Trigger (maintenance on `maintenanceCron`'s). Nudges and fan-out request the
 * worker route through the SKIPLOCK_SELF service binding, kept alive with `ctx.waitUntil`. Only the
 * neon-http driver holds on Workers (CLOUDFLARE_DRIVERS): another is refused with a ConfigError as
 * the Worker's module loads when its variables are in `process.env` (nodejs_compat, compatibility
 * date 2025-04-01 or later), else at the first event, before any statement.
 */
export function createCloudflareWorker(jobs: Kinds, options: CloudflareWorkerOptions = {}): CloudflareWorker {
  const cpuMs = options.cpuMs ?? CLOUDFLARE_LIMITS.cpuMs;
  if (cpuMs < CLOUDFLARE_LIMITS.minCpuMs) {
    throw new ConfigError(
      `cpuMs ${cpuMs} is too little CPU time to run a worker invocation (at least ${CLOUDFLARE_LIMITS.minCpuMs}; ` +
        `the Workers Paid plan allows 30000 by default, up to 300000 with limits.cpu_ms)`,
    );
  }
  const budgetMs = Math.min(cpuMs, CLOUDFLARE_LIMITS.waitUntilMs);
  const selfName = options.selfBinding ?? 'SKIPLOCK_SELF';
  const refuse = (env: Record<string, string | undefined>) => {
    assertCloudflareDriver(env);
    refuseUnfitKinds(jobs, env, options, () => budgetMs);
  };
  // Variables known as the module loads (process.env populated by nodejs_compat): refuse now.
  const early = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (early?.DATABASE_URL !== undefined) refuse({ SKIPLOCK_DRIVER: 'neon-http', ...early });

  // The request whose `ctx` keeps the work it started alive.
  const current = new AsyncLocalStorage<CloudflareContext>();
  const waitUntil: WaitUntil = (promise) => {
    const ctx = current.getStore();
    if (ctx) ctx.waitUntil(promise);
    else promise.catch(() => {});
  };
  let built: { key: string; app: PlatformApp } | undefined;
  const appFor = (env: CloudflareEnv): PlatformApp => {
    const text = textEnv(env);
    const key = JSON.stringify(text);
    if (built?.key === key) return built.app;
    refuse(text);
    const self = env[selfName] as CloudflareServiceBinding | undefined;
    let nudger: Nudger | undefined;
    let fanOut: InvocationStarter | undefined;
    const route = options.routes?.worker === false ? undefined : (options.routes?.worker ?? PLATFORM_ROUTES.worker);
    const workerPath = route && `${(options.basePath ?? '').replace(/\/+$/, '')}${route}`;
    if (self && typeof self.fetch === 'function' && workerPath) {
      const logger = sharedRuntime(text).logger;
      const warn = (event: string, fields: Record<string, unknown>) => logger.warn(event, fields);
      const nudgeStarter = bindingStarter(self, workerPath, text.CRON_SECRET, 'nudge', waitUntil, warn);
      nudger = createNudger({ workerFor: () => nudgeStarter, logger, clock: keptAlive(options.clock, waitUntil) });
      const maxInvocations = new EnvironmentSettings(text).require('worker').maxInvocations;
      if (maxInvocations !== undefined) {
        fanOut = bindingStarter(self, workerPath, text.CRON_SECRET, 'fan-out', waitUntil, warn);
      }
    }
    const app = createPlatformApp(jobs, {
      ...options,
      env: text,
      budgetMs,
      waitUntil,
      nudger,
      fanOut,
      console: { trustProxyHeaders: true, ...options.console },
    });
    built = { key, app };
    return app;
  };

  return {
    fetch(request, env, ctx) {
      return current.run(ctx, async () => {
        try {
          return await appFor(env).fetch(consoleClient(request));
        } catch (err) {
          const message = err instanceof ConfigError ? err.message : 'internal error';
          return Response.json({ error: { code: 'config', message } }, { status: 500 });
        }
      });
    },
    scheduled(controller, env, ctx) {
      return current.run(ctx, async () => {
        const route = controller.cron === options.maintenanceCron ? 'maintenance' : 'worker';
        const response = await appFor(env).tick(route);
        // A failed tick is a failed Cron Trigger in the dashboard (its summary is in the logs).
        if (response.status >= 500) throw new Error(`skiplock ${route} tick failed: ${await response.text()}`);
      });
    },
  };
}

/**
 * The client address Cloudflare's edge sets (`cf-connecting-ip`, which a client cannot forge) as
 * the one the console's login throttle counts by; proxy headers a client could send are dropped.
 */
function consoleClient(request: Request): Request {
  const headers = new Headers(request.headers);
  for (const name of ['x-forwarded-for', 'x-forwarded-host', 'x-real-ip']) headers.delete(name);
  const client = request.headers.get('cf-connecting-ip');
  if (client) headers.set('x-real-ip', client);
  return new Request(request, { headers });
}

export { PLATFORM_ROUTES, type PlatformApp, type PlatformRoute } from './platform-routes.js';
