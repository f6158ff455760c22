import { ConfigError } from '../base/errors.js';
import type { JobDefinition } from '../core/jobs.js';
import {
  assertCloudflareDriver,
  CLOUDFLARE_DRIVERS,
  CloudflareRequest,
  cloudflareDatabase,
  opensSockets,
} from './cloudflare-drivers.js';
import { createPlatformApp, type PlatformApp, type PlatformAppOptions } from './platform-routes.js';
import { MIN_CPU_MS, refuseUnfitKinds, withinCpuLimit } from './worker-fit.js';

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
export const CLOUDFLARE_LIMITS = { cpuMs: 30_000, waitUntilMs: 30_000, minCpuMs: MIN_CPU_MS } as const;

export { assertCloudflareDriver, CLOUDFLARE_DRIVERS };

export interface CloudflareWorkerOptions
  extends Omit<
    PlatformAppOptions,
    'platform' | 'env' | 'budgetMs' | 'waitUntil' | 'nudger' | 'fanOut' | 'fanOutPath' | 'self' | 'clientOf'
  > {
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
  /**
   * Starts the workers of these queues now through the SKIPLOCK_SELF binding, as the enqueue route
   * does: for jobs your own routes enqueued, after your transaction committed (PlatformApp.nudge).
   * The request is kept alive with `ctx.waitUntil`; a failed start is logged, never thrown (a
   * ConfigError of the Worker's settings is, as `fetch` answers 500 for it).
   */
  nudge(queues: readonly string[], request: Request, env: CloudflareEnv, ctx: CloudflareContext): Promise<void>;
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

/** The origin nudges and fan-out request the worker route at through the service binding. */
const SELF_ORIGIN = 'https://skiplock.internal';

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
  const budgetMs = withinCpuLimit(
    CLOUDFLARE_LIMITS.waitUntilMs,
    options.cpuMs ?? CLOUDFLARE_LIMITS.cpuMs,
    'the Workers Paid plan allows 30000 by default, up to 300000 with limits.cpu_ms',
  );
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

  let built: { key: string; app: PlatformApp; sockets: boolean } | undefined;
  const appFor = (env: CloudflareEnv): { app: PlatformApp; sockets: boolean } => {
    const { text, hyperdrive } = textEnv(env, options.hyperdrive);
    const key = JSON.stringify(text);
    if (built?.key === key) return built;
    refuse(text, hyperdrive);
    const binding = env[selfName] as CloudflareServiceBinding | undefined;
    const app = createPlatformApp(jobs, {
      ...options,
      platform: 'cloudflare',
      env: text,
      budgetMs,
      // Outside an event (none reaches here): the promise runs on while the isolate does.
      waitUntil: (promise) => void promise.catch(() => {}),
      self:
        typeof binding?.fetch === 'function'
          ? { fetch: (url, init) => binding.fetch(new Request(url, init)), origin: SELF_ORIGIN }
          : undefined,
      // Cloudflare's edge sets it; a client cannot forge it (proxy headers it could are not read).
      clientOf: (request) => request.headers.get('cf-connecting-ip') ?? undefined,
    });
    built = { key, app, sockets: opensSockets(text.SKIPLOCK_DRIVER) };
    return built;
  };
  const contextOf = (ctx: CloudflareContext) => ({ waitUntil: (promise: Promise<unknown>) => ctx.waitUntil(promise) });

  return {
    async fetch(request, env, ctx) {
      // The request's ctx, counting the work it keeps alive (its sockets close after all of it).
      const served = new CloudflareRequest(ctx);
      try {
        const { app, sockets } = appFor(env);
        return await served.run(sockets, () => app.fetch(request, contextOf(served)));
      } catch (err) {
        const message = err instanceof ConfigError ? err.message : 'internal error';
        return Response.json({ error: { code: 'config', message } }, { status: 500 });
      }
    },
    async nudge(queues, request, env, ctx) {
      const { app } = appFor(env);
      await app.nudge(queues, request, contextOf(new CloudflareRequest(ctx)));
    },
    async scheduled(controller, env, ctx) {
      const served = new CloudflareRequest(ctx);
      const route = controller.cron === options.maintenanceCron ? 'maintenance' : 'worker';
      const { app, sockets } = appFor(env);
      const response = await served.run(sockets, () => app.tick(route, contextOf(served)));
      // A failed tick is a failed Cron Trigger in the dashboard (its summary is in the logs).
      if (response.status >= 500) throw new Error(`skiplock ${route} tick failed: ${await response.text()}`);
    },
  };
}

export { PLATFORM_ROUTES, type PlatformApp, type PlatformRoute } from './platform-routes.js';
