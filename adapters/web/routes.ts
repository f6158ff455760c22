import { isLabel } from '../../base/identifiers.js';
import type { InvocationStarter } from '../../base/starter.js';
import { JobRegistry } from '../../core/jobs.js';
import type { QueueMetrics } from '../../core/metrics.js';
import type { Nudger } from '../../core/nudge.js';
import type { Tracing } from '../../core/tracing.js';
import type { Purpose, SkiplockConfig } from '../config.js';
import { cookieFrom } from '../console/http.js';
import { type ConsoleOptions, createConsole, UNKNOWN_CLIENT } from '../console/index.js';
import { type FunctionRuntime, publicMessage, sharedRuntime } from '../runtime.js';
import { controlFromBody } from './control.js';
import {
  errorResponse,
  type HttpResponse,
  jsonResponse,
  readBody,
  readJson,
  readOptionalJson,
  requireBearer,
} from './http.js';
import { hintAfterRun, type IdleHints } from './idle.js';
import { DeployedWorker, enqueueFromBody, replayFromBody, runMaintenanceTick, signalFromToken } from './operations.js';
import type { Env, Kinds, WorkerChoices } from './options.js';
import { routeUrl, startReasonOf, type WaitUntil } from './start.js';

/**
 * The web core: every route of a deployed app (enqueue, replay, control, signal, the worker,
 * maintenance, the console) written once against Web `Request` / `Response`, with a scheduled entry
 * point for the worker and maintenance. A platform adapter is a converter (its events to a Request,
 * a Response to its results) and a `WebPlatform`: where the environment comes from, how writes wake
 * the workers, how a worker route keeps running after its answer.
 */

/** A route of the web core: a Web Request in, a Response out (never a stack). */
export type WebRoute = (request: Request) => Promise<Response>;

/**
 * An operation with a bearer secret and a JSON body (enqueue, replay, control). `serve` makes it a
 * route; `invoke` calls it for a caller the platform authenticated itself (a Lambda direct invoke,
 * which IAM authorizes), the body as given. Apart, so a platform bundles only the paths it uses.
 */
export interface JsonOperation {
  platform: WebPlatform;
  /** The bearer secret's variable, checked before anything else. */
  secret: 'SKIPLOCK_ENQUEUE_TOKEN' | 'SKIPLOCK_ADMIN_TOKEN';
  /** The settings whose maxBodyBytes limits the body. */
  purpose: 'enqueue' | 'replay';
  /** Who a change is recorded as when the body names no `by`. */
  by: string;
  perform(runtime: FunctionRuntime, body: unknown, from: { url?: URL; by: string }): Promise<HttpResponse>;
}

/**
 * What a platform plugs into the routes. Everything else — bearer checks, body limits and strict
 * decoding, parsing, the core's calls, errors → status, the order of it all — is the routes'.
 */
export interface WebPlatform {
  /** The environment a request reads (secrets included), read again on each request. */
  env(): Env;
  /**
   * The instance's nudger (one per instance, so that nudges coalesce across its requests): starts
   * the workers of the queues a write made due. `url` is the request's (none for an invoke), for a
   * platform that requests its own routes. @defaultValue none: the next tick runs the jobs
   */
  nudger?(runtime: FunctionRuntime, url: URL | undefined): Nudger | undefined | Promise<Nudger | undefined>;
  /** Every queue name the nudger routes (`*` included): what a console action nudges. */
  nudgedQueues?(runtime: FunctionRuntime): readonly string[] | undefined;
  /**
   * Marks the schema written so that idle ticks query the database again (`idle`: SKIPLOCK_IDLE);
   * bounded, never failing. Called before a write (enqueue, replay, control, a console POST) and
   * after a signal that woke jobs. @defaultValue none (a platform whose ticks always query)
   */
  markWritten?(runtime: FunctionRuntime, idle: boolean): Promise<void>;
  /** Who an admin change made over this route is recorded as when the body names no `by`. */
  by(route: 'replay' | 'control'): string;
}

/**
 * Where a platform requests its own routes (nudges, fan-out): SKIPLOCK_BASE_URL — all of it where
 * the platform's function sees the paths below its path (`belowPath`: Supabase serves
 * `/functions/v1/skiplock` as `/skiplock`), else its origin (Vercel sees the whole path) — or else
 * the origin of the request being served.
 */
export function baseOfRoutes(baseUrl: string | undefined, url: URL | undefined, belowPath: boolean | undefined) {
  if (baseUrl) return belowPath ? baseUrl : new URL(baseUrl).origin;
  return url?.origin;
}

/**
 * A platform whose writes start the worker routes SKIPLOCK_NUDGE_ROUTES names, by request, at
 * `origin` (else SKIPLOCK_BASE_URL, else the origin of the request being served), with CRON_SECRET:
 * `options.nudger` when given, else the one `nudgerOf` makes — one per instance, so that nudges
 * coalesce across its requests; a changed secret, origin or routes get a new one.
 */
export function nudgingRoutes(
  platform: WebPlatform,
  options: {
    nudger?: Nudger;
    origin?: string;
    /** The routes' paths are below SKIPLOCK_BASE_URL's path (baseOfRoutes). @defaultValue false: at its origin */
    belowBasePath?: boolean;
    nudgerOf(
      routes: Readonly<Record<string, string>>,
      origin: string,
      secret: string | undefined,
      runtime: FunctionRuntime,
    ): Nudger | Promise<Nudger>;
  },
): WebPlatform {
  const nudgerFor = perInstance<Nudger | Promise<Nudger>>();
  return {
    ...platform,
    nudger(runtime, url) {
      if (options.nudger) return options.nudger;
      const { nudgeRoutes, baseUrl } = runtime.settings.require('enqueue');
      const origin = options.origin ?? baseOfRoutes(baseUrl, url, options.belowBasePath);
      if (!nudgeRoutes || !origin) return undefined;
      const secret = platform.env().CRON_SECRET;
      // Kept in memory only: a changed secret or origin gets a new nudger.
      return nudgerFor([nudgeRoutes, origin, secret ?? null], () =>
        options.nudgerOf(nudgeRoutes, origin, secret, runtime),
      );
    },
    nudgedQueues: (runtime) => {
      const routes = runtime.settings.require('enqueue').nudgeRoutes;
      return routes && Object.keys(routes);
    },
  };
}

/** Runs a route: any failure becomes a JSON error response, never a stack. */
export function jsonRoute(handle: (request: Request, url: URL) => Promise<HttpResponse>): WebRoute {
  return async (request) => {
    try {
      return jsonResponse(await handle(request, new URL(request.url)));
    } catch (err) {
      return jsonResponse(errorResponse(err));
    }
  };
}

/** Marks the schema written when the platform keeps idle hints (the purpose's settings say whether). */
async function markWritten(platform: WebPlatform, runtime: FunctionRuntime, purpose: Purpose): Promise<void> {
  if (platform.markWritten) await platform.markWritten(runtime, runtime.settings.require(purpose).idle);
}

/** The platform's nudger, or none when a setting it needs is wrong: a nudge never fails a write. */
async function nudgerOrNone(platform: WebPlatform, runtime: FunctionRuntime, url: URL | undefined) {
  try {
    return await platform.nudger?.(runtime, url);
  } catch {
    return undefined;
  }
}

/**
 * The operation as a POST route: the bearer is checked before anything else (no configuration
 * detail reaches an anonymous caller), then the body is read under its limit.
 */
export function serve(operation: JsonOperation): WebRoute {
  const { platform, secret, purpose, by } = operation;
  return jsonRoute(async (request, url) => {
    const env = platform.env();
    requireBearer(request, env[secret], secret);
    const runtime = sharedRuntime(env);
    const body = await readJson(request, runtime.settings.require(purpose).maxBodyBytes);
    return operation.perform(runtime, body, { url, by });
  });
}

/** The operation for a caller the platform authenticated: the body as given; errors answered, never thrown. */
export async function invoke(operation: JsonOperation, body: unknown, by?: string): Promise<HttpResponse> {
  try {
    return await operation.perform(sharedRuntime(operation.platform.env()), body, { by: by ?? operation.by });
  } catch (err) {
    return errorResponse(err);
  }
}

/**
 * Enqueue (bearer SKIPLOCK_ENQUEUE_TOKEN): `{ kind, payload, options? }`, `{ jobs: [...] }` or
 * `{ flow: { step: job } }`, in one statement; then nudges the workers of the queues written to.
 */
export function enqueueRoute(jobs: Kinds, platform: WebPlatform, options: { tracing?: Tracing } = {}): JsonOperation {
  const registry = new JobRegistry(jobs);
  return {
    platform,
    secret: 'SKIPLOCK_ENQUEUE_TOKEN',
    purpose: 'enqueue',
    by: 'enqueue',
    async perform(runtime, body, { url }) {
      const nudger = await platform.nudger?.(runtime, url);
      await markWritten(platform, runtime, 'enqueue');
      return { status: 200, body: await enqueueFromBody(runtime, registry, body, nudger, options.tracing) };
    },
  };
}

/**
 * Replay dead jobs (bearer SKIPLOCK_ADMIN_TOKEN): ids or a filter, limit, dryRun, resetAttempts,
 * override, by. The replayed jobs are due at once: it nudges the workers of their queues.
 */
export function replayRoute(jobs: Kinds, platform: WebPlatform): JsonOperation {
  const registry = new JobRegistry(jobs);
  return adminOperation(platform, 'replay', async (runtime, body, from) => {
    const result = await replayFromBody(runtime, registry, body, from.by);
    const queues = [...new Set(result.replayed.map((job) => job.queue))];
    if (!result.dryRun && queues.length > 0) {
      const nudger = await nudgerOrNone(platform, runtime, from.url);
      await nudger?.noteDue?.(queues.map((queue) => ({ queue, at: null })));
      await nudger?.nudge(queues);
    }
    runtime.logger.info('replay', {
      replayed: result.replayed.length,
      refused: result.refused.length,
      dryRun: result.dryRun,
    });
    return { status: 200, body: { ...result } };
  });
}

/**
 * Flow control (bearer SKIPLOCK_ADMIN_TOKEN): pause, resume, list, limits, breakers, rate limits
 * (`{ action, queue | kind, reason?, by? }`).
 */
export function controlRoute(platform: WebPlatform): JsonOperation {
  return adminOperation(platform, 'control', async (runtime, body, from) => ({
    status: 200,
    body: { ...(await controlFromBody(runtime, body, from.by)) },
  }));
}

/**
 * An operator's operation: bearer SKIPLOCK_ADMIN_TOKEN, the replay settings' body limit, and the
 * schema marked written first (a replay or a resume frees work; a pause or a list costs at most a
 * tick or two of queries).
 */
function adminOperation(
  platform: WebPlatform,
  route: 'replay' | 'control',
  perform: JsonOperation['perform'],
): JsonOperation {
  return {
    platform,
    secret: 'SKIPLOCK_ADMIN_TOKEN',
    purpose: 'replay',
    by: platform.by(route),
    async perform(runtime, body, from) {
      await markWritten(platform, runtime, 'replay');
      return perform(runtime, body, from);
    },
  };
}

/**
 * Signal callbacks from outside (`POST …?token=`, a token from `createSignalToken` signed with
 * SKIPLOCK_SIGNAL_SECRET): one signal on the token's key, the JSON body as its payload. No bearer:
 * the signed, expiring, single-use token is the credential. Nudges the workers of the woken jobs.
 */
export function signalRoute(platform: WebPlatform): WebRoute {
  return jsonRoute(async (request, url) => {
    const env = platform.env();
    const runtime = sharedRuntime(env);
    const token = url.searchParams.get('token') ?? undefined;
    const read = (maxBytes: number) => readOptionalJson(request, maxBytes);
    const nudger = await platform.nudger?.(runtime, url);
    const result = await signalFromToken(runtime, env.SKIPLOCK_SIGNAL_SECRET, token, read, nudger);
    // After the signal: the token is the credential, checked inside. A woken job waits at most one
    // more tick if a tick read its hint between the commit and the mark; the nudge starts it first.
    if (result.signal.queues.length > 0) await markWritten(platform, runtime, 'enqueue');
    return { status: 200, body: result };
  });
}

/** The console's client address from the proxy headers, when they may be trusted. */
function proxiedClient(headers: Headers): string | undefined {
  const forwarded = headers.get('x-forwarded-for')?.split(',')[0]?.trim();
  return headers.get('x-real-ip') ?? forwarded;
}

/**
 * The operator console (GET and POST). `trustProxyHeaders`: whether x-real-ip / x-forwarded-for
 * give the client address and x-forwarded-host a host a form may come from (the platform's default
 * when the option is unset). A platform that knows the client's address passes it as `client`. A
 * POST marks the schema written first; an action that went through nudges every worker the
 * nudger routes (a replayed or resumed job runs at once).
 */
export function consoleRoute(
  jobs: Kinds,
  platform: WebPlatform,
  options: ConsoleOptions & { trustProxyHeaders: boolean },
): (request: Request, client?: string) => Promise<Response> {
  const handle = createConsole(jobs, options, platform.env);
  const trusted = options.trustProxyHeaders;
  const serve = async (request: Request, client: string | undefined): Promise<Response> => {
    const headers = request.headers;
    const url = new URL(request.url);
    // The first proxy's (the one the browser reached), when there are several.
    const forwardedHost = trusted ? headers.get('x-forwarded-host')?.split(',')[0]?.trim() : undefined;
    const response = await handle({
      method: request.method,
      url,
      hosts: [headers.get('host') ?? url.host, ...(forwardedHost ? [forwardedHost] : [])],
      header: (name) => headers.get(name) ?? undefined,
      cookie: (name) => cookieFrom(headers.get('cookie') ?? undefined, name),
      client: client ?? (trusted ? proxiedClient(headers) : undefined) ?? UNKNOWN_CLIENT,
      readBody: (maxBytes) => readBody(request, maxBytes),
    });
    const out = new Headers(response.headers);
    for (const cookie of response.cookies) out.append('set-cookie', cookie);
    const body = request.method.toUpperCase() === 'HEAD' || response.status === 303 ? null : response.body;
    return new Response(body, { status: response.status, headers: out });
  };
  return async (request, client) => {
    if (request.method.toUpperCase() !== 'POST') return serve(request, client);
    // A setting the console cannot read is the console's to answer (it says which one).
    let runtime: FunctionRuntime | undefined;
    try {
      runtime = sharedRuntime(platform.env());
      if (runtime.settings.require('console').idle) await markWritten(platform, runtime, 'console');
    } catch {
      // answered by the console below
    }
    const response = await serve(request, client);
    if (runtime && response.status < 400 && new URL(request.url).pathname.endsWith('/actions')) {
      // Which queues an action touched is the console's business: wake every worker (a nudge with
      // nothing to do costs one short invocation).
      const nudger = await nudgerOrNone(platform, runtime, new URL(request.url));
      let queues: readonly string[] | undefined;
      try {
        queues = platform.nudgedQueues?.(runtime);
      } catch {
        queues = undefined;
      }
      await nudger?.nudge(queues ?? ['*']);
    }
    return response;
  };
}

/** `/api/reports-worker` → `api.reports-worker` (a worker name); undefined when it cannot be one. */
export function nameOfRoute(pathname: string): string | undefined {
  const name = pathname.replace(/^\/+|\/+$/g, '').replaceAll('/', '.');
  return isLabel(name) ? name : undefined;
}

const isoOf = (ms: number) => new Date(ms).toISOString();

/** What a platform whose maintenance and worker run on requests (or a scheduled event) plugs in. */
export interface TickPlatform {
  /** The environment a request reads (secrets included), read again on each request. */
  env(): Env;
  /** The variable holding the bearer secret the scheduler sends (Vercel: CRON_SECRET). */
  secret: string;
  /** The invocation's budget in ms: the platform's time limit for this function. */
  budgetMs(config: SkiplockConfig): number;
  /** The idle hints of this schema, or undefined: every tick queries the database. */
  idleHints?(runtime: FunctionRuntime, idle: boolean): IdleHints | undefined;
}

/** …and a worker's: how it keeps running after a started request's answer, how it fans out. */
export interface WorkerPlatform extends TickPlatform {
  /** Keeps the function alive after a started request's 202 while its invocation runs. */
  waitUntil(): WaitUntil | Promise<WaitUntil>;
  /**
   * A starter of this worker route at `url` (its own fan-out): a request with `secret` and the
   * START_HEADER. @defaultValue none: no fan-out unless the worker's `fanOut` option gives one
   */
  routeStarter?(url: URL, secret: string | undefined, runtime: FunctionRuntime): InvocationStarter;
  /**
   * Where the fan-out requests its route. @defaultValue SKIPLOCK_BASE_URL (below its path with
   * `belowBasePath`, see baseOfRoutes), else the origin of the request being served
   */
  origin?: string;
  /** The routes' paths are below SKIPLOCK_BASE_URL's path (baseOfRoutes). @defaultValue false: at its origin */
  belowBasePath?: boolean;
  /**
   * The path the fan-out requests: a function of its own that runs this worker longer (Netlify's
   * background function). @defaultValue the path of the worker route being served
   */
  fanOutPath?: string;
}

/** A scheduler's tick, as a route and as a scheduled entry point. */
export interface TickEntries {
  /** Over HTTP: the bearer secret checked first; a JSON answer, errors included. */
  fetch: WebRoute;
  /**
   * A platform's scheduled event (no HTTP, no bearer): the answer a route would give, never thrown.
   * `url`: the route the event stands for, which names the worker and is what its fan-out requests.
   */
  scheduled(url?: URL): Promise<HttpResponse>;
}

type Tick = (request: Request | undefined, url: URL | undefined) => Promise<HttpResponse>;

function tickEntries(tick: Tick): TickEntries {
  return {
    fetch: jsonRoute(tick),
    async scheduled(url) {
      try {
        return await tick(undefined, url);
      } catch (err) {
        return errorResponse(err);
      }
    },
  };
}

/** One value per instance, made again only when its key changes (a rotated secret, another origin). */
export function perInstance<T>(): (key: readonly unknown[], make: () => T) => T {
  let made: string | undefined;
  let value!: T;
  return (key, make) => {
    const text = JSON.stringify(key);
    if (made !== text) {
      made = text;
      value = make();
    }
    return value;
  };
}

/** A worker route's options: the worker's, its name, and its own hints' wall clock (test.now). */
export interface WorkerRouteOptions extends Omit<WorkerChoices, 'env'> {
  /** What its invocations are counted under. @defaultValue SKIPLOCK_WORKER_NAME, else the route's path with dots */
  name?: string;
}

/**
 * The worker, over HTTP (`fetch`: a scheduler's GET with the bearer secret, or a nudge's or a
 * fan-out's request with START_HEADER, accepted at once with 202 and run after the answer, kept
 * alive by `waitUntil`) and as a scheduled entry point (`scheduled`: a platform's cron event, no
 * HTTP). With idle hints, a scheduler's tick with nothing due answers without the database. The
 * worker is made once per warm instance and kept across the requests it serves.
 */
export function workerRoute(jobs: Kinds, platform: WorkerPlatform, options: WorkerRouteOptions): TickEntries {
  const worker = new DeployedWorker(jobs);
  const ownStarter = perInstance<InvocationStarter | undefined>();
  const fanOutOf = (runtime: FunctionRuntime, url: URL | undefined, secret: string | undefined) => {
    if (options.fanOut === false) return undefined;
    if (options.fanOut) return options.fanOut;
    const { baseUrl } = runtime.settings.require('worker');
    const origin = platform.origin ?? baseOfRoutes(baseUrl, url, platform.belowBasePath);
    if (!url || !origin || !platform.routeStarter) return undefined;
    const target = routeUrl(platform.fanOutPath ?? url.pathname, origin);
    // Kept in memory only: a changed secret or origin gets a new starter.
    return ownStarter([target.href, secret ?? null], () => platform.routeStarter?.(target, secret, runtime));
  };
  const now = () => options.test?.now?.().getTime() ?? Date.now();

  const tick: Tick = async (request, url) => {
    const env = platform.env();
    if (request) requireBearer(request, env[platform.secret], platform.secret);
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('worker');
    const name = options.name ?? (env.SKIPLOCK_WORKER_NAME || !url ? undefined : nameOfRoute(url.pathname));
    const run = {
      remainingMs: platform.budgetMs(config),
      queues: options.queues,
      slowQueues: options.slowQueues,
      kinds: options.kinds,
      clock: options.clock,
      schedules: options.schedules,
      tracing: options.tracing,
      metrics: options.metrics,
      drizzle: options.drizzle,
      test: options.test,
      name,
      fanOut: config.maxInvocations === undefined ? undefined : fanOutOf(runtime, url, env[platform.secret]),
    };
    const reason = request ? startReasonOf(request) : undefined;
    const hints = platform.idleHints?.(runtime, config.idle);
    const key = hints?.keyOf({ worker: name ?? config.workerName });
    let woke: string | undefined;
    if (hints && key && !reason) {
      // A scheduler's tick: nothing due, nothing written since the hint → answer without the
      // database (no connection is made). A started request always queries: a write sent it.
      const check = await hints.check(key, now(), config.idleRecheckMs);
      if (check.skip) {
        const { wakeAt, computedAt } = check.hint;
        const recheckAt = computedAt + config.idleRecheckMs;
        return {
          status: 200,
          body: { idle: true, wakeAt: isoOf(Math.min(wakeAt, recheckAt)), computedAt: isoOf(computedAt) },
        };
      }
      woke = check.reason;
    }
    const invoke = async () => {
      const computedAt = now();
      const summary = await worker.run(runtime, { ...run, nextDue: hints !== undefined });
      if (hints && key) {
        // Work done makes maintenance due, and other workers' hints untrusted: a handler may have
        // enqueued to their queues without a nudge.
        if (summary.claimed > 0) await hints.touch(now());
        await hints.record(
          key,
          hintAfterRun(computedAt, now(), summary.nextDueAt, config.idleRecheckMs),
          config.idleRecheckMs,
        );
      }
      return summary;
    };
    if (!reason) {
      // A failed invocation (the database unreachable, a statement refused) is a failure to the
      // platform too: 503, so cron dashboards and uptime checks see it; the body is the summary.
      const summary = await invoke();
      const body = woke ? { ...summary, woke } : { ...summary };
      return { status: summary.stoppedBecause === 'error' ? 503 : 200, body };
    }
    const waitUntil = await platform.waitUntil();
    const invocation = invoke().catch((err: unknown) => {
      runtime.logger.error('worker_failed', { error: publicMessage(err) });
    });
    waitUntil(invocation);
    return { status: 202, body: { accepted: true, start: reason } };
  };
  return tickEntries(tick);
}

/**
 * Maintenance, over HTTP (`fetch`: a scheduler's GET with the bearer secret) and as a scheduled
 * entry point: deadlines to the DLQ, retention pruning, stats. With idle hints, a quiet tick
 * (nothing changed, nothing ready or running) lets the next ticks answer without the database
 * until a write or a worker that did work marks the schema, or the recheck comes.
 */
export function maintenanceRoute(
  platform: TickPlatform,
  options: { metrics?: QueueMetrics; test?: { now?: () => Date } } = {},
): TickEntries {
  const now = () => options.test?.now?.().getTime() ?? Date.now();
  const tick: Tick = async (request) => {
    const env = platform.env();
    if (request) requireBearer(request, env[platform.secret], platform.secret);
    const runtime = sharedRuntime(env);
    const config = runtime.settings.require('maintenance');
    const hints = platform.idleHints?.(runtime, config.idle);
    const key = hints?.keyOf('maintenance');
    let woke: string | undefined;
    if (hints && key) {
      const check = await hints.check(key, now(), config.idleRecheckMs);
      if (check.skip) {
        const wakeAt = check.hint.computedAt + config.idleRecheckMs;
        return { status: 200, body: { idle: true, wakeAt: isoOf(wakeAt), computedAt: isoOf(check.hint.computedAt) } };
      }
      woke = check.reason;
    }
    const computedAt = now();
    const report = await runMaintenanceTick(runtime, platform.budgetMs(config), false, options.metrics);
    if (hints && key) {
      const hint = hintAfterRun(computedAt, now(), report.quiet ? null : undefined, config.idleRecheckMs);
      await hints.record(key, hint, config.idleRecheckMs);
    }
    return { status: 200, body: woke ? { ...report, woke } : { ...report } };
  };
  return tickEntries(tick);
}

export type { HttpResponse } from './http.js';
export type { Env, Kinds } from './options.js';
