import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError } from '../base/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import type { JobDefinition } from '../core/jobs.js';
import { createNudger, type Nudger } from '../core/nudge.js';
import type { InvocationStarter } from '../core/worker/index.js';
import {
  assertCloudflareDriver,
  CLOUDFLARE_DRIVERS,
  CloudflareRequest,
  cloudflareDatabase,
  opensSockets,
} from './cloudflare-drivers.js';
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

export { assertCloudflareDriver, CLOUDFLARE_DRIVERS };

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
  /**
   * The Hyperdrive binding skiplock connects through (wrangler's `hyperdrive`): its connection
   * string is the database and pg the driver; `false` ignores any, to connect with DATABASE_URL.
   * @defaultValue the binding HYPERDRIVE when there is one, else none
   */
  hyperdrive?: string | false;
}

/** The Worker's module: `export default createCloudflareWorker(jobs, { schedules })`. */
export interface CloudflareWorker {
  fetch(request: Request, env: CloudflareEnv, ctx: CloudflareContext): Promise<Response>;
  scheduled(controller: CloudflareScheduledController, env: CloudflareEnv, ctx: CloudflareContext): Promise<void>;
}

/**
 * The Worker's text variables and secrets, and its database (cloudflareDatabase: a Hyperdrive
 * binding, else DATABASE_URL; the driver defaults to the bundle's, else neon-http).
 */
function textEnv(env: CloudflareEnv, hyperdrive: string | false | undefined) {
  const text: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(env)) if (typeof value === 'string') text[name] = value;
  const through = cloudflareDatabase(text, env, hyperdrive);
  return { text, hyperdrive: through };
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
 * worker route through the SKIPLOCK_SELF service binding, kept alive with `ctx.waitUntil`. Every
 * driver holds (CLOUDFLARE_DRIVERS): pg and neon-ws open their pool for each request and close it
 * once the request's work is done. A driver that cannot hold as configured (assertCloudflareDriver)
 * is refused with a ConfigError as the Worker's module loads when its variables are in `process.env`
 * (nodejs_compat, compatibility date 2025-04-01 or later), else at the first event, before any statement.
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
  const refuse = (env: Record<string, string | undefined>, hyperdrive?: string) => {
    assertCloudflareDriver(env, hyperdrive);
    refuseUnfitKinds(jobs, env, options, () => budgetMs);
  };
  // Variables known as the module loads (process.env populated by nodejs_compat): refuse now. Its
  // bindings (a Hyperdrive's) come with the first event.
  const early = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (early?.DATABASE_URL !== undefined) {
    const text = { ...early };
    cloudflareDatabase(text, {}, false);
    refuse(text);
  }

  // The request whose `ctx` keeps the work it started alive (and closes its sockets after it).
  const current = new AsyncLocalStorage<CloudflareRequest>();
  const waitUntil: WaitUntil = (promise) => {
    const ctx = current.getStore();
    if (ctx) ctx.waitUntil(promise);
    else promise.catch(() => {});
  };
  let built: { key: string; app: PlatformApp; sockets: boolean } | undefined;
  const appFor = (env: CloudflareEnv): { app: PlatformApp; sockets: boolean } => {
    const { text, hyperdrive } = textEnv(env, options.hyperdrive);
    const key = JSON.stringify(text);
    if (built?.key === key) return built;
    refuse(text, hyperdrive);
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
    built = { key, app, sockets: opensSockets(text.SKIPLOCK_DRIVER) };
    return built;
  };

  return {
    fetch(request, env, ctx) {
      const served = new CloudflareRequest(ctx);
      return current.run(served, async () => {
        try {
          const { app, sockets } = appFor(env);
          return await served.run(sockets, () => app.fetch(consoleClient(request)));
        } catch (err) {
          const message = err instanceof ConfigError ? err.message : 'internal error';
          return Response.json({ error: { code: 'config', message } }, { status: 500 });
        }
      });
    },
    scheduled(controller, env, ctx) {
      const served = new CloudflareRequest(ctx);
      return current.run(served, async () => {
        const route = controller.cron === options.maintenanceCron ? 'maintenance' : 'worker';
        const { app, sockets } = appFor(env);
        const response = await served.run(sockets, () => app.tick(route));
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
