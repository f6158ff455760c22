import { ConfigError } from '../base/errors.js';
import type { JobDefinition } from '../core/jobs.js';
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
  extends Omit<
    PlatformAppOptions,
    'platform' | 'env' | 'budgetMs' | 'waitUntil' | 'nudger' | 'fanOut' | 'self' | 'clientOf'
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

/** The origin nudges and fan-out request the worker route at through the service binding. */
const SELF_ORIGIN = 'https://skiplock.internal';

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
  const budgetMs = withinCpuLimit(
    CLOUDFLARE_LIMITS.waitUntilMs,
    options.cpuMs ?? CLOUDFLARE_LIMITS.cpuMs,
    'the Workers Paid plan allows 30000 by default, up to 300000 with limits.cpu_ms',
  );
  const selfName = options.selfBinding ?? 'SKIPLOCK_SELF';
  const refuse = (env: Record<string, string | undefined>) => {
    assertCloudflareDriver(env);
    refuseUnfitKinds(jobs, env, options, () => budgetMs);
  };
  // Variables known as the module loads (process.env populated by nodejs_compat): refuse now.
  const early = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  if (early?.DATABASE_URL !== undefined) refuse({ SKIPLOCK_DRIVER: 'neon-http', ...early });

  let built: { key: string; app: PlatformApp } | undefined;
  const appFor = (env: CloudflareEnv): PlatformApp => {
    const text = textEnv(env);
    const key = JSON.stringify(text);
    if (built?.key === key) return built.app;
    refuse(text);
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
    built = { key, app };
    return app;
  };
  const contextOf = (ctx: CloudflareContext) => ({ waitUntil: (promise: Promise<unknown>) => ctx.waitUntil(promise) });

  return {
    async fetch(request, env, ctx) {
      try {
        return await appFor(env).fetch(request, contextOf(ctx));
      } catch (err) {
        const message = err instanceof ConfigError ? err.message : 'internal error';
        return Response.json({ error: { code: 'config', message } }, { status: 500 });
      }
    },
    async scheduled(controller, env, ctx) {
      const route = controller.cron === options.maintenanceCron ? 'maintenance' : 'worker';
      const response = await appFor(env).tick(route, contextOf(ctx));
      // A failed tick is a failed Cron Trigger in the dashboard (its summary is in the logs).
      if (response.status >= 500) throw new Error(`skiplock ${route} tick failed: ${await response.text()}`);
    },
  };
}

export { PLATFORM_ROUTES, type PlatformApp, type PlatformRoute } from './platform-routes.js';
