import { AsyncResource } from 'node:async_hooks';
import type { InvocationStarter } from '../../base/starter.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { type Logger, silentLogger } from '../../core/logger.js';
import { createNudger, type Nudger } from '../../core/nudge.js';
import { MIN_SECRET_LENGTH } from './http.js';

/**
 * Starting a worker route over HTTP, for any platform whose worker is a route (Vercel, and a
 * platform that runs its worker on a request of its own): a nudge or a fan-out is a GET of the
 * route with the worker's bearer secret and START_HEADER, which the route accepts at once (202)
 * and runs after its response, kept alive by the platform's `waitUntil`.
 */

/**
 * The header a started worker request carries (`nudge` or `fan-out`): with it, the worker route
 * accepts at once (202) and runs its invocation after the response, kept alive with `waitUntil`,
 * as Lambda runs an asynchronous Invoke. Without it (a cron) the route answers when it is done.
 */
export const START_HEADER = 'x-skiplock-start';
export const START_REASONS = ['nudge', 'fan-out'] as const;
export type StartReason = (typeof START_REASONS)[number];

/** The start reason a request's START_HEADER names, if any. */
export function startReasonOf(request: Request): StartReason | undefined {
  const header = request.headers.get(START_HEADER);
  return START_REASONS.find((reason) => reason === header);
}

/** What `start` waits for at most: the started route's 202, not its run. @defaultValue 10 s */
export const ROUTE_START_DEFAULTS = { acceptTimeoutMs: 10_000 } as const;

/**
 * Keeps the function running after its response until the promise settles: `waitUntil` of
 * `@vercel/functions`, `after` of `next/server`, a Worker's `ctx.waitUntil`.
 */
export type WaitUntil = (promise: Promise<unknown>) => void;

/**
 * How a start's request is sent: the global `fetch`, or a platform's own way to reach its routes (a
 * Worker's service binding to itself).
 */
export type RouteFetch = (url: URL, init: RequestInit) => Promise<Response>;

/** Loopback hosts may be requested over plain http (local development); any other needs https. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The URL a route is requested at: `target` when it is absolute, else `target` (a path such as
 * `/api/worker`) below `base`, an origin or an origin and a path (SKIPLOCK_BASE_URL on a platform
 * that serves its functions below one, else the origin of the request being handled).
 */
export function routeUrl(target: string, base: string): URL {
  if (!target.startsWith('/')) return new URL(target, base);
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${target}`;
  url.search = '';
  url.hash = '';
  return url;
}

export interface RouteStarterOptions {
  /** The worker route's bearer secret; unset: every start fails, and is logged. */
  secret: string | undefined;
  /** The secret's variable, named in the error when it is missing. @defaultValue 'CRON_SECRET' */
  secretName?: string;
  /** Sent as the START_HEADER; also names the failure logged (`nudge_failed`, `fan_out_failed`). */
  reason: StartReason;
  /** @defaultValue silentLogger */
  logger?: Logger;
  /** How long one start waits for the route's 202 before it lets go. @defaultValue 10000 */
  acceptTimeoutMs?: number;
  /** More headers each request carries (a platform's own: Vercel's protection bypass). */
  headers?: Record<string, string>;
  /** What keeps each request alive after the caller's response (asked on each start, in the caller's turn). */
  waitUntil: () => WaitUntil | Promise<WaitUntil>;
  /** How each request is sent. @defaultValue the global fetch */
  fetch?: RouteFetch;
}

/**
 * Starts invocations of a worker route by requesting it (GET, `Authorization: Bearer <secret>`,
 * START_HEADER). `start` only sends: each request is handed to `waitUntil`, so the calling function
 * answers its own caller at once and stays alive only until the started route accepted (202,
 * within `acceptTimeoutMs`) — never for the started invocation's whole run. A refused or failed
 * start is logged (status or error code, never the secret); the scheduler's tick stays the safety net.
 */
export function routeStarter(url: URL, options: RouteStarterOptions): InvocationStarter {
  const logger = options.logger ?? silentLogger;
  const acceptTimeoutMs = options.acceptTimeoutMs ?? ROUTE_START_DEFAULTS.acceptTimeoutMs;
  const secretName = options.secretName ?? 'CRON_SECRET';
  const failure = options.reason === 'nudge' ? 'nudge_failed' : 'fan_out_failed';
  // Where, without the query (it could hold anything): enough to find the route in the logs.
  const target = `${url.origin}${url.pathname}`;

  const deliver = async (headers: Record<string, string>): Promise<void> => {
    try {
      const response = await (options.fetch ?? fetch)(url, {
        headers,
        // A redirect would carry the secret elsewhere: a worker route never redirects.
        redirect: 'manual',
        signal: AbortSignal.timeout(acceptTimeoutMs),
      });
      let code: string | undefined;
      if (!response.ok) {
        const body = (await response.json().catch(() => undefined)) as { error?: { code?: unknown } } | undefined;
        code = typeof body?.error?.code === 'string' ? body.error.code : undefined;
      }
      // An accepted start's body is worth nothing; let the connection go.
      await response.body?.cancel().catch(() => {});
      if (!response.ok) logger.warn(failure, { route: target, status: response.status, code });
    } catch (err) {
      // Connection refused, DNS, timeout: the error's name and code, never the request's headers.
      const cause = (err as { cause?: { code?: unknown } }).cause;
      const code = typeof cause?.code === 'string' ? cause.code : undefined;
      logger.warn(failure, { route: target, error: (err as Error).name ?? 'Error', code });
    }
  };

  return {
    async start(count) {
      if (!options.secret || options.secret.length < MIN_SECRET_LENGTH) {
        throw new Error(`${secretName} must be set (at least ${MIN_SECRET_LENGTH} characters) to start ${target}`);
      }
      if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname))) {
        throw new Error(`refusing to send ${secretName} to ${target}: use https (plain http only to localhost)`);
      }
      // Once loaded, handed to waitUntil in the caller's own turn (no await first): a nudger's
      // timer (keepingAlive) lets its request go as soon as the start returns.
      const known = options.waitUntil();
      const waitUntil = typeof known === 'function' ? known : await known;
      const headers: Record<string, string> = {
        ...options.headers,
        authorization: `Bearer ${options.secret}`,
        [START_HEADER]: options.reason,
      };
      for (let i = 0; i < count; i++) waitUntil(deliver(headers));
    },
  };
}

/**
 * A clock whose timers keep the current request alive until they fire (through `waitUntil`), and
 * fire in that request's context: the nudger's one more start at the end of its window must not
 * wait for a frozen function, and its request is kept alive by the same request.
 */
export function keepingAlive(clock: Clock, waitUntil: WaitUntil): Clock {
  return {
    now: () => clock.now(),
    setTimer(fn, ms) {
      let fired!: () => void;
      waitUntil(
        new Promise<void>((resolve) => {
          fired = resolve;
        }),
      );
      const inRequest = AsyncResource.bind(fn);
      const cancel = clock.setTimer(() => {
        try {
          inRequest(); // a start hands its request to waitUntil before returning
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
 * A nudger that requests the worker route of each queue (`routes`: queue → path or URL, `*` for
 * every queue not named), coalesced per route (one start at once, one more when the window ends).
 * With `waitUntil`, the window's timer keeps the function alive with it.
 */
export function routeNudger(
  routes: Readonly<Record<string, string>>,
  options: Omit<RouteStarterOptions, 'reason' | 'waitUntil'> & {
    /** The origin the routes' paths are requested at. */
    origin: string;
    coalesceMs?: number;
    clock?: Clock;
    waitUntil?: WaitUntil;
    /** How each start gets its waitUntil when `waitUntil` is not given. */
    loadWaitUntil: () => WaitUntil | Promise<WaitUntil>;
  },
): Nudger {
  const starters = new Map<string, InvocationStarter>();
  const { origin, waitUntil, loadWaitUntil, coalesceMs, clock, ...starter } = options;
  return createNudger({
    coalesceMs,
    logger: options.logger,
    clock: waitUntil ? keepingAlive(clock ?? systemClock, waitUntil) : (clock ?? systemClock),
    workerFor: (queue) => {
      const route = routes[queue] ?? routes['*'];
      if (!route) return undefined;
      const url = routeUrl(route, origin);
      let known = starters.get(url.href);
      if (!known) {
        known = routeStarter(url, { ...starter, reason: 'nudge', waitUntil: () => waitUntil ?? loadWaitUntil() });
        starters.set(url.href, known);
      }
      return known;
    },
  });
}
