import type { JobDefinition } from '../core/jobs.js';
import {
  createPlatformApp,
  PLATFORM_ROUTES,
  type PlatformApp,
  type PlatformAppOptions,
  type PlatformRequest,
} from './platform-routes.js';
import { START_HEADER, type WaitUntil } from './web/start.js';
import { refuseUnfitKinds } from './worker-fit.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

/** What skiplock uses of a Netlify Function's `context`. */
export interface NetlifyContext {
  waitUntil?(promise: Promise<unknown>): void;
  /** The client's address, as Netlify's edge saw it. */
  ip?: string;
}
/** A Netlify Function (v2): `export default createNetlify…(jobs)`. */
export type NetlifyFunction = (request: Request, context?: NetlifyContext) => Promise<Response>;

/**
 * Netlify's execution limits (docs.netlify.com/build/functions): a scheduled function runs for at
 * most 30 s, a background function (a file named `…-background`) for 15 min; a synchronous
 * function's default is 10 s (configurable per site).
 */
export const NETLIFY_LIMITS = { scheduledMs: 30_000, backgroundMs: 900_000, synchronousMs: 10_000 } as const;

/** Where Netlify serves the background worker (netlify/functions/skiplock-worker-background.ts). */
export const NETLIFY_BACKGROUND_PATH = '/.netlify/functions/skiplock-worker-background';

export interface NetlifyOptions
  extends Omit<PlatformAppOptions, 'platform' | 'env' | 'budgetMs' | 'waitUntil' | 'self' | 'clientOf' | 'fanOutPath'> {
  /** @defaultValue process.env */
  env?: Env;
  /** This function's invocation budget in ms. @defaultValue its kind's limit in NETLIFY_LIMITS */
  budgetMs?: number;
  /**
   * The background worker's path, which the fan-out and continuations of every worker request
   * (below SKIPLOCK_BASE_URL, with CRON_SECRET): the routes function's worker route has only its
   * 10 s. @defaultValue NETLIFY_BACKGROUND_PATH
   */
  backgroundPath?: string;
}

/**
 * One app per function module; each request brings its own `context.waitUntil` and client address.
 * A function that runs a worker (`runsWorker`) refuses the kinds that cannot fit its budget.
 */
function appOf(jobs: Kinds, options: NetlifyOptions, limitMs: number, runsWorker: boolean): PlatformApp {
  const env = options.env ?? process.env;
  const budgetMs = options.budgetMs ?? limitMs;
  if (runsWorker) refuseUnfitKinds(jobs, env, options, () => budgetMs);
  const waitUntil: WaitUntil = (promise) => void promise.catch(() => {});
  const { backgroundPath = NETLIFY_BACKGROUND_PATH, ...rest } = options;
  return createPlatformApp(jobs, {
    ...rest,
    platform: 'netlify',
    env,
    budgetMs,
    waitUntil,
    fanOutPath: backgroundPath,
  });
}

/** What a Netlify Function's context tells of its request. */
const platformRequest = (context: NetlifyContext | undefined): PlatformRequest => ({
  waitUntil: context?.waitUntil && ((promise) => context.waitUntil?.(promise)),
  client: context?.ip,
});

/**
 * netlify/functions/skiplock.ts, every route of PLATFORM_ROUTES (`export const config = { path:
 * ['/skiplock/*', '/admin', '/admin/*'] }`). Nudges request the background worker
 * (SKIPLOCK_NUDGE_ROUTES=*=/.netlify/functions/skiplock-worker-background). With `routes: { worker:
 * false }` it runs no worker, and no kind has to fit its 10 s.
 */
export function createNetlifyRoutes(jobs: Kinds, options: NetlifyOptions = {}): NetlifyFunction {
  const app = appOf(jobs, options, NETLIFY_LIMITS.synchronousMs, options.routes?.worker !== false);
  return (request, context) => app.fetch(request, platformRequest(context));
}

/**
 * netlify/functions/skiplock-worker.ts with `export const config = { schedule: '* * * * *' }`: each
 * scheduled run is a worker tick within the scheduled functions' 30 s. Netlify invokes it itself (a
 * scheduled function has no public URL), so the tick runs the worker with no bearer to check.
 */
export function createNetlifyScheduledWorker(jobs: Kinds, options: NetlifyOptions = {}): NetlifyFunction {
  const app = appOf(jobs, options, NETLIFY_LIMITS.scheduledMs, true);
  return (_request, context) => app.tick('worker', platformRequest(context));
}

/**
 * netlify/functions/skiplock-maintenance.ts, scheduled every 10 minutes as on the other platforms
 * (its `config.schedule`, in the template): each scheduled run is a maintenance tick — deadlines
 * to the DLQ, the activity rollup, retention — within the scheduled functions' 30 s, with no bearer
 * to check, as the scheduled worker's. It runs no worker: no kind has to fit its time.
 */
export function createNetlifyScheduledMaintenance(jobs: Kinds, options: NetlifyOptions = {}): NetlifyFunction {
  const app = appOf(jobs, options, NETLIFY_LIMITS.scheduledMs, false);
  return (_request, context) => app.tick('maintenance', platformRequest(context));
}

/**
 * netlify/functions/skiplock-worker-background.ts: what nudges and fan-out request. Netlify answers
 * them 202 itself and runs the function for up to 15 min, so the invocation runs in the function's
 * own time (the start header dropped): the route's bearer CRON_SECRET is checked as on the worker route.
 * Its caller never sees a refusal (Netlify has answered 202): the function's log says it instead.
 */
export function createNetlifyBackgroundWorker(jobs: Kinds, options: NetlifyOptions = {}): NetlifyFunction {
  const app = appOf(jobs, options, NETLIFY_LIMITS.backgroundMs, true);
  const path = options.routes?.worker || PLATFORM_ROUTES.worker;
  return async (request, context) => {
    const headers = new Headers(request.headers);
    headers.delete(START_HEADER);
    const url = new URL(`${(options.basePath ?? '').replace(/\/+$/, '')}${path}`, request.url);
    const response = await app.fetch(new Request(url, { headers }), platformRequest(context));
    if (response.status === 401) {
      const body = (await response
        .clone()
        .json()
        .catch(() => undefined)) as { error?: { message?: unknown } } | undefined;
      const line = { level: 'warn', msg: 'background_start_refused', status: 401, error: body?.error?.message };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    }
    return response;
  };
}

/** Starts the background worker from a function of the app's own (createNetlifyNudger). */
export interface NetlifyNudger {
  /**
   * After your transaction committed: requests the worker routes SKIPLOCK_NUDGE_ROUTES names for
   * these queues (the background worker), as the routes function's enqueue does. A start that
   * fails is logged (`nudge_failed`), never thrown; the scheduled worker runs the jobs then.
   */
  nudge(queues: readonly string[], request?: Request, context?: NetlifyContext): Promise<void>;
}

/**
 * For a function of your own that enqueues: `const skiplock = createNetlifyNudger()` at module
 * scope, then `await skiplock.nudge([sendEmail.queue], request, context)` after the commit. It runs
 * no worker and serves no route.
 */
export function createNetlifyNudger(options: NetlifyOptions = {}): NetlifyNudger {
  const app = appOf([], options, NETLIFY_LIMITS.synchronousMs, false);
  return { nudge: (queues, request, context) => app.nudge(queues, request, platformRequest(context)) };
}

export { PLATFORM_ROUTES, type PlatformApp, type PlatformRoute } from './platform-routes.js';
