import { ConfigError } from '../base/errors.js';
import type { InvocationStarter } from '../base/starter.js';
import type { Clock } from '../core/clock.js';
import { jsonLogger, type Logger, silentLogger } from '../core/logger.js';
import type { Nudger } from '../core/nudge.js';
import { importOptionalPeer } from './optional-peer.js';
import { defaultIdleHints } from './vercel-idle.js';
import { type IdleHintStore, IdleHints } from './web/idle.js';
import { ROUTE_START_DEFAULTS, routeNudger, routeStarter, type StartReason, type WaitUntil } from './web/start.js';

/**
 * Vercel's side of starting worker routes (adapters/web/start.ts): `waitUntil` from
 * `@vercel/functions`, the Deployment Protection bypass, the Runtime Cache marks of `noteDue`.
 */

/** Nudges or fan-out were asked for, but `@vercel/functions` cannot be loaded. */
export class MissingVercelFunctionsError extends ConfigError {
  constructor() {
    super(
      'nudges and fan-out on Vercel keep their requests alive with waitUntil from @vercel/functions, which is not ' +
        'installed: add it to your app (npm install @vercel/functions)',
    );
  }
}

/** What `start` waits for at most: the started route's 202, not its run. @defaultValue 10 s */
export const VERCEL_START_DEFAULTS = ROUTE_START_DEFAULTS;
let loading: Promise<WaitUntil> | undefined;
/** Once loaded, starts hand their requests to waitUntil in the caller's own turn (no await first). */
let loaded: WaitUntil | undefined;

/**
 * `waitUntil` of `@vercel/functions`, loaded on first use (an optional peer: an app that never
 * nudges or fans out never loads it). On Vercel it keeps the function running after its response
 * until the promise settles (within the function's maxDuration). Outside Vercel, or outside a
 * request, it finds no request context and does nothing: the promise simply runs on in the
 * process, which is what a long-running server (`npm run dev`, a test) wants.
 */
export function loadWaitUntil(): Promise<WaitUntil> {
  loading ??= importOptionalPeer(
    () => import(/* webpackIgnore: true */ /* turbopackIgnore: true */ '@vercel/functions'),
    () => new MissingVercelFunctionsError(),
  ).then(
    (functions) => {
      loaded = functions.waitUntil;
      return loaded;
    },
    (err: unknown) => {
      loading = undefined; // installed later (a test, a hot reload): try again
      throw err;
    },
  );
  return loading;
}

export interface VercelStarterOptions {
  /** The worker route's bearer secret (CRON_SECRET); unset: every start fails, and is logged. */
  secret: string | undefined;
  /** Sent as the START_HEADER; also names the failure logged (`nudge_failed`, `fan_out_failed`). */
  reason: StartReason;
  /** @defaultValue silentLogger */
  logger?: Logger;
  /** How long one start waits for the route's 202 before it lets go. @defaultValue 10000 */
  acceptTimeoutMs?: number;
  /**
   * Sent as `x-vercel-protection-bypass`, for deployments behind Vercel's Deployment Protection.
   * @defaultValue VERCEL_AUTOMATION_BYPASS_SECRET (set by Vercel when the bypass is enabled)
   */
  protectionBypass?: string;
  /** What keeps each request alive after the caller's response. @defaultValue waitUntil of @vercel/functions */
  waitUntil?: WaitUntil;
}

/**
 * Starts invocations of a Vercel worker route by requesting it (routeStarter: GET, `Authorization:
 * Bearer $CRON_SECRET`, START_HEADER), each request kept alive by `waitUntil` until the route
 * accepted; behind Deployment Protection with its bypass header.
 */
export function vercelRouteStarter(url: URL, options: VercelStarterOptions): InvocationStarter {
  const bypass = options.protectionBypass ?? process.env.VERCEL_AUTOMATION_BYPASS_SECRET;
  return routeStarter(url, {
    ...options,
    headers: bypass ? { 'x-vercel-protection-bypass': bypass } : undefined,
    waitUntil: () => options.waitUntil ?? loaded ?? loadWaitUntil(),
  });
}

/**
 * Which worker route runs each queue, for nudges: `{ emails: '/api/worker', '*': … }` (`*`: every
 * queue not named); a path is requested on the base origin, an absolute URL as it is. Read from
 * SKIPLOCK_NUDGE_ROUTES as `emails,webhooks=/api/worker;reports=/api/reports-worker`.
 */
export type NudgeRoutes = Readonly<Record<string, string>>;

export interface VercelNudgerOptions {
  /**
   * The origin the routes' paths are requested at, e.g. `https://my-app.vercel.app`.
   * @defaultValue SKIPLOCK_BASE_URL; else in production `https://$VERCEL_PROJECT_PRODUCTION_URL`;
   * else this deployment's own `https://$VERCEL_URL` (a preview's); else `http://localhost:$PORT`
   * (3000): `next dev` and `next start`
   */
  origin?: string;
  /** CRON_SECRET, which the worker routes check. */
  secret: string | undefined;
  /** @defaultValue 1000 (see NudgerOptions.coalesceMs) */
  coalesceMs?: number;
  /** Where a failed start is said (`nudge_failed`). @defaultValue JSON lines on stdout, warnings and errors */
  logger?: Logger;
  /** @defaultValue the system clock */
  clock?: Clock;
  acceptTimeoutMs?: number;
  protectionBypass?: string;
  /**
   * Where `noteDue` marks the schema written, so that idle worker and maintenance ticks query the
   * database again (docs/deploy-vercel.md, "Idle ticks"); `false`: no mark. @defaultValue Vercel's
   * Runtime Cache on Vercel (none elsewhere, or with SKIPLOCK_IDLE=false)
   */
  idleHints?: IdleHintStore | false;
  /** The schema the jobs are written to. @defaultValue SKIPLOCK_SCHEMA, else 'skiplock' */
  schema?: string;
  /** The wall time the marks are stamped with (tests only). @defaultValue the system's */
  test?: { now?: () => Date };
}

/**
 * A nudger that requests the worker route of each queue, coalesced per route (one start at once,
 * one more when the window ends). Load `waitUntil` first (`await loadWaitUntil()`): the window's
 * timer keeps the function alive with it; `start` fails, logged, while it cannot be loaded.
 */
export function createVercelNudger(
  routes: NudgeRoutes,
  options: VercelNudgerOptions & { waitUntil?: WaitUntil },
): Nudger {
  const { protectionBypass, origin, ...rest } = options;
  const bypass = protectionBypass ?? process.env.VERCEL_AUTOMATION_BYPASS_SECRET;
  const nudger = routeNudger(routes, {
    ...rest,
    origin: origin ?? ownOrigin(process.env),
    logger: options.logger ?? jsonLogger({ level: 'warn' }),
    headers: bypass ? { 'x-vercel-protection-bypass': bypass } : undefined,
    loadWaitUntil: () => loaded ?? loadWaitUntil(),
  });
  const store = options.idleHints === undefined ? defaultIdleHints(process.env) : options.idleHints;
  if (!store) return nudger;
  const hints = new IdleHints(store, {
    schema: options.schema ?? process.env.SKIPLOCK_SCHEMA ?? 'skiplock',
    logger: options.logger ?? silentLogger,
  });
  const now = () => options.test?.now?.().getTime() ?? Date.now();
  return {
    nudge: (queues) => nudger.nudge(queues),
    // Before the caller's commit: a tick that queries the database between the two distrusts the
    // hint it writes (IDLE_DEFAULTS.graceMs), so it cannot hide the job.
    noteDue: () => hints.touch(now()),
  };
}

/**
 * Where this app's own routes answer when the nudger is not told: SKIPLOCK_BASE_URL; else, in
 * production, the project's production domain (VERCEL_PROJECT_PRODUCTION_URL: Deployment
 * Protection leaves it open, not the deployment's own URL); else this deployment's (a preview's:
 * VERCEL_URL, without a scheme); else the local server's (`next dev`, `next start`: PORT, 3000).
 */
export function ownOrigin(env: Record<string, string | undefined>): string {
  if (env.SKIPLOCK_BASE_URL) return env.SKIPLOCK_BASE_URL;
  if (env.VERCEL_ENV === 'production' && env.VERCEL_PROJECT_PRODUCTION_URL)
    return `https://${env.VERCEL_PROJECT_PRODUCTION_URL}`;
  if (env.VERCEL_URL) return `https://${env.VERCEL_URL}`;
  return `http://localhost:${env.PORT || 3000}`;
}

export { routeUrl, START_HEADER, type StartReason, type WaitUntil } from './web/start.js';
