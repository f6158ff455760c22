import { AsyncResource } from 'node:async_hooks';
import { ConfigError } from '../base/errors.js';
import { type Clock, systemClock } from '../core/clock.js';
import { type Logger, silentLogger } from '../core/logger.js';
import { createNudger, type Nudger } from '../core/nudge.js';
import type { InvocationStarter } from '../core/worker/index.js';
import { MIN_SECRET_LENGTH } from './http.js';
import { importOptionalPeer } from './optional-peer.js';
import { defaultIdleHints, type IdleHintStore, IdleHints } from './vercel-idle.js';

/**
 * The header a started worker request carries (`nudge` or `fan-out`): with it, the worker route
 * accepts at once (202) and runs its invocation after the response, kept alive with `waitUntil`,
 * as Lambda runs an asynchronous Invoke. Without it (a cron) the route answers when it is done.
 */
export const START_HEADER = 'x-skiplock-start';
export const START_REASONS = ['nudge', 'fan-out'] as const;
export type StartReason = (typeof START_REASONS)[number];

/** What `start` waits for at most: the started route's 202, not its run. @defaultValue 10 s */
export const VERCEL_START_DEFAULTS = { acceptTimeoutMs: 10_000 } as const;

/** Nudges or fan-out were asked for, but `@vercel/functions` cannot be loaded. */
export class MissingVercelFunctionsError extends ConfigError {
  constructor() {
    super(
      'nudges and fan-out on Vercel keep their requests alive with waitUntil from @vercel/functions, which is not ' +
        'installed: add it to your app (npm install @vercel/functions)',
    );
  }
}

/**
 * Keeps the function running after its response until the promise settles: `waitUntil` of
 * `@vercel/functions`, or `after` of `next/server` in a Next.js app.
 */
export type WaitUntil = (promise: Promise<unknown>) => void;
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

/** Loopback hosts may be requested over plain http (local development); any other needs https. */
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The URL a route is requested at: `target` when it is absolute, else `target` (a path such as
 * `/api/worker`) on `origin` (SKIPLOCK_BASE_URL, else the origin of the request being handled).
 */
export function routeUrl(target: string, origin: string): URL {
  return new URL(target, origin);
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
 * Starts invocations of a Vercel worker route by requesting it (GET, `Authorization: Bearer
 * $CRON_SECRET`, START_HEADER). `start` only sends: each request is handed to `waitUntil`, so the
 * calling function answers its own caller at once and stays alive only until the started route
 * accepted (202, within `acceptTimeoutMs`) — never for the started invocation's whole run. A
 * refused or failed start is logged (status or error code, never the secret); the cron tick stays
 * the safety net.
 */
export function vercelRouteStarter(url: URL, options: VercelStarterOptions): InvocationStarter {
  const logger = options.logger ?? silentLogger;
  const acceptTimeoutMs = options.acceptTimeoutMs ?? VERCEL_START_DEFAULTS.acceptTimeoutMs;
  const bypass = options.protectionBypass ?? process.env.VERCEL_AUTOMATION_BYPASS_SECRET;
  const failure = options.reason === 'nudge' ? 'nudge_failed' : 'fan_out_failed';
  // Where, without the query (it could hold anything): enough to find the route in the logs.
  const target = `${url.origin}${url.pathname}`;

  const deliver = async (headers: Record<string, string>): Promise<void> => {
    try {
      const response = await fetch(url, {
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
        throw new Error(`CRON_SECRET must be set (at least ${MIN_SECRET_LENGTH} characters) to start ${target}`);
      }
      if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname))) {
        throw new Error(`refusing to send CRON_SECRET to ${target}: use https (plain http only to localhost)`);
      }
      const waitUntil = options.waitUntil ?? loaded ?? (await loadWaitUntil());
      const headers: Record<string, string> = {
        authorization: `Bearer ${options.secret}`,
        [START_HEADER]: options.reason,
      };
      if (bypass) headers['x-vercel-protection-bypass'] = bypass;
      for (let i = 0; i < count; i++) waitUntil(deliver(headers));
    },
  };
}

/**
 * Which worker route runs each queue, for nudges: `{ emails: '/api/worker', '*': … }` (`*`: every
 * queue not named); a path is requested on the base origin, an absolute URL as it is. Read from
 * SKIPLOCK_NUDGE_ROUTES as `emails,webhooks=/api/worker;reports=/api/reports-worker`.
 */
export type NudgeRoutes = Readonly<Record<string, string>>;

export interface VercelNudgerOptions {
  /** The origin the routes' paths are requested at, e.g. `https://my-app.vercel.app`. */
  origin: string;
  /** CRON_SECRET, which the worker routes check. */
  secret: string | undefined;
  /** @defaultValue 1000 (see NudgerOptions.coalesceMs) */
  coalesceMs?: number;
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
 * A clock whose timers keep the current request alive until they fire (through `waitUntil`), and
 * fire in that request's context: the nudger's one more start at the end of its window must not
 * wait for a frozen function, and its request is kept alive by the same request.
 */
function keepingAlive(clock: Clock, waitUntil: WaitUntil): Clock {
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
 * A nudger that requests the worker route of each queue, coalesced per route (one start at once,
 * one more when the window ends). Load `waitUntil` first (`await loadWaitUntil()`): the window's
 * timer keeps the function alive with it; `start` fails, logged, while it cannot be loaded.
 */
export function createVercelNudger(
  routes: NudgeRoutes,
  options: VercelNudgerOptions & { waitUntil?: WaitUntil },
): Nudger {
  const starters = new Map<string, InvocationStarter>();
  const { origin, secret, logger, acceptTimeoutMs, protectionBypass } = options;
  const clock = options.clock ?? systemClock;
  const nudger = createNudger({
    coalesceMs: options.coalesceMs,
    logger,
    clock: options.waitUntil ? keepingAlive(clock, options.waitUntil) : clock,
    workerFor: (queue) => {
      const route = routes[queue] ?? routes['*'];
      if (!route) return undefined;
      const url = routeUrl(route, origin);
      let starter = starters.get(url.href);
      if (!starter) {
        starter = vercelRouteStarter(url, {
          secret,
          reason: 'nudge',
          logger,
          acceptTimeoutMs,
          protectionBypass,
          waitUntil: options.waitUntil,
        });
        starters.set(url.href, starter);
      }
      return starter;
    },
  });
  const store = options.idleHints === undefined ? defaultIdleHints(process.env) : options.idleHints;
  if (!store) return nudger;
  const hints = new IdleHints(store, {
    schema: options.schema ?? process.env.SKIPLOCK_SCHEMA ?? 'skiplock',
    logger: logger ?? silentLogger,
  });
  const now = () => options.test?.now?.().getTime() ?? Date.now();
  return {
    nudge: (queues) => nudger.nudge(queues),
    // Before the caller's commit: a tick that queries the database between the two distrusts the
    // hint it writes (IDLE_DEFAULTS.graceMs), so it cannot hide the job.
    noteDue: () => hints.touch(now()),
  };
}
