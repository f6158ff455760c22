import { ConfigError } from '../base/errors.js';
import type { JobDefinition } from '../core/jobs.js';
import { EnvironmentSettings } from './config.js';
import { createPlatformApp, type PlatformApp, type PlatformAppOptions } from './platform-routes.js';
import type { WaitUntil } from './web/start.js';
import { refuseUnfitKinds, withinCpuLimit } from './worker-fit.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

/** What skiplock uses of the `Deno` global (read from globalThis: this module also loads in Node). */
interface DenoLike {
  env: { toObject(): Record<string, string> };
  serve?: (
    options: { port?: number; hostname?: string },
    handler: (request: Request, info?: { remoteAddr?: { hostname?: string } }) => Promise<Response>,
  ) => unknown;
  cron?: (name: string, schedule: string, handler: () => Promise<void>) => Promise<void>;
}
/** Supabase Edge Runtime's global: keeps the function alive after its response. */
interface EdgeRuntimeLike {
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Supabase Edge Functions' limits (supabase.com/docs/guides/functions/limits): 150 s of wall time
 * per request on the Free plan, 400 s on paid plans; 2 s of CPU time per request.
 */
export const SUPABASE_LIMITS = { wallMs: 150_000, cpuMs: 2_000 } as const;

export interface DenoAppOptions
  extends Omit<PlatformAppOptions, 'platform' | 'env' | 'budgetMs' | 'waitUntil' | 'self' | 'fanOutPath'> {
  /** @defaultValue Deno.env.toObject() */
  env?: Env;
  /**
   * Each worker and maintenance invocation's budget in ms, at most `cpuMs` where it is set.
   * @defaultValue SKIPLOCK_MAX_DURATION_MS, capped on Supabase at its wall-time limit (SUPABASE_LIMITS.wallMs)
   */
  budgetMs?: number;
  /**
   * The platform's CPU time per request in ms: each invocation's budget is at most this, since CPU
   * time never exceeds wall time in a single-threaded isolate (a wall-time budget within the CPU
   * limit bounds both, as on Cloudflare). Under 1000 it is refused: no worker can run in it.
   * `false`: the budget is bounded by wall time alone, for handlers that mostly wait on I/O — one
   * that spends the CPU time ends the invocation mid-attempt (its lease runs out, the job runs again).
   * @defaultValue 2000 on Supabase (SUPABASE_LIMITS.cpuMs); none elsewhere
   */
  cpuMs?: number | false;
  /** @defaultValue EdgeRuntime.waitUntil on Supabase; elsewhere the promise runs on in the process */
  waitUntil?: WaitUntil;
}

export interface DenoServeOptions extends DenoAppOptions {
  /**
   * The schedule Deno.cron runs the worker on (Deno Deploy; the CLI needs `--unstable-cron`);
   * `false`: none, as on Supabase, where a pg_cron schedule requests the worker route
   * (docs/deploy-deno.md). @defaultValue each minute (DENO_CRONS.worker) where Deno.cron exists, else none
   */
  cron?: string | false;
  /**
   * The schedule Deno.cron runs maintenance on (deadlines, the activity rollup, retention); `false`:
   * none (on Supabase a pg_cron schedule requests the maintenance route). @defaultValue every 10
   * minutes (DENO_CRONS.maintenance) where Deno.cron exists and `cron` is not `false`, else none
   */
  maintenanceCron?: string | false;
  /** @defaultValue Deno.serve's (8000, or the platform's) */
  port?: number;
  /** @defaultValue Deno.serve's */
  hostname?: string;
}

function denoGlobal(): DenoLike | undefined {
  return (globalThis as { Deno?: DenoLike }).Deno;
}

function edgeRuntime(): EdgeRuntimeLike | undefined {
  return (globalThis as { EdgeRuntime?: EdgeRuntimeLike }).EdgeRuntime;
}

/**
 * skiplock's routes for Deno, Deno Deploy and Supabase Edge Functions (PLATFORM_ROUTES, below
 * `basePath`): `app.fetch` for `Deno.serve`, `app.tick('worker')` for a scheduler.
 */
export function createDenoApp(jobs: Kinds, options: DenoAppOptions = {}): PlatformApp {
  const env = options.env ?? denoGlobal()?.env.toObject() ?? {};
  const edge = edgeRuntime();
  const configured = (() => {
    const settings = new EnvironmentSettings(env);
    return settings.problems('worker').length > 0 ? undefined : settings.require('worker').maxDurationMs;
  })();
  let budgetMs = options.budgetMs ?? configured ?? SUPABASE_LIMITS.wallMs;
  if (edge) budgetMs = Math.min(budgetMs, SUPABASE_LIMITS.wallMs);
  const cpuMs = options.cpuMs === false ? undefined : (options.cpuMs ?? (edge ? SUPABASE_LIMITS.cpuMs : undefined));
  if (cpuMs !== undefined) {
    budgetMs = withinCpuLimit(
      budgetMs,
      cpuMs,
      `the platform's CPU time per request: ${SUPABASE_LIMITS.cpuMs} on Supabase`,
    );
  }
  try {
    refuseUnfitKinds(jobs, env, options, () => budgetMs);
  } catch (err) {
    // The usual advice (raise the function's timeout) cannot help where CPU time bounds the budget.
    if (!(err instanceof ConfigError) || cpuMs === undefined || budgetMs < cpuMs) throw err;
    throw new ConfigError(
      `${err.message} (here the budget is the ${cpuMs} ms of CPU time a request gets, cpuMs, which no ` +
        'timeout raises: lower the kind’s timeoutMs, run it on another platform, or pass cpuMs: false ' +
        'if its handler mostly waits on I/O)',
    );
  }
  const waitUntil: WaitUntil =
    options.waitUntil ??
    (edge
      ? (promise) => edge.waitUntil(promise)
      : (promise) => {
          promise.catch(() => {});
        });
  return createPlatformApp(jobs, { ...options, platform: 'deno', env, budgetMs, waitUntil });
}

/** How often Deno.cron runs the worker and maintenance by default, as on the other platforms. */
export const DENO_CRONS = { worker: '* * * * *', maintenance: '*/10 * * * *' } as const;

/**
 * Serves skiplock's routes with `Deno.serve`, and runs the worker every minute and maintenance
 * every 10 with `Deno.cron` where it exists (`cron: false` on Supabase: schedule both routes with
 * pg_cron instead).
 */
export function serveDeno(jobs: Kinds, options: DenoServeOptions = {}): PlatformApp {
  const deno = denoGlobal();
  if (!deno?.serve) throw new ConfigError('serveDeno runs in Deno (Deno.serve); elsewhere use createDenoApp');
  const app = createDenoApp(jobs, options);
  const worker = options.cron ?? (deno.cron ? DENO_CRONS.worker : false);
  const maintenance = options.maintenanceCron ?? (deno.cron && options.cron !== false ? DENO_CRONS.maintenance : false);
  for (const [route, schedule] of [
    ['worker', worker],
    ['maintenance', maintenance],
  ] as const) {
    if (schedule === false) continue;
    if (!deno.cron) {
      throw new ConfigError(
        `Deno.cron is not available: run with --unstable-cron, or set ${route === 'worker' ? 'cron' : 'maintenanceCron'}: false`,
      );
    }
    void deno.cron(`skiplock ${route}`, schedule, async () => {
      await (await app.tick(route)).body?.cancel();
    });
  }
  // The client's address as Deno saw it; on Supabase a request arrives through its gateway, whose it would be.
  const onSupabase = edgeRuntime() !== undefined;
  deno.serve({ port: options.port, hostname: options.hostname }, (request, info) =>
    app.fetch(request, { client: onSupabase ? undefined : info?.remoteAddr?.hostname }),
  );
  return app;
}

export { PLATFORM_ROUTES, type PlatformApp, type PlatformRoute } from './platform-routes.js';
