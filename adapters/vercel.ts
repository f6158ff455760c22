import type { Clock } from '../core/clock.js';
import type { JobDefinition } from '../core/jobs.js';
import { JobRegistry } from '../core/jobs.js';
import { errorResponse, type HttpRequest, type HttpResponse, readJson, requireBearer, tooLarge } from './http.js';
import { enqueueFromBody, replayFromBody, runMaintenanceTick, runWorker } from './operations.js';
import { sharedRuntime } from './runtime.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;

export interface VercelWorkerOptions {
  env?: Env;
  /** The function's maxDuration in ms (keep equal to vercel.json). @defaultValue SKIPLOCK_MAX_DURATION_MS */
  maxDurationMs?: number;
  /**
   * Only these queues, e.g. a route for slow reports; wins over SKIPLOCK_QUEUES (Vercel's variables
   * are project-wide, so a route dedicated to some queues names them here).
   * @defaultValue SKIPLOCK_QUEUES, else all
   */
  queues?: readonly string[];
  /** Only these kinds; wins over SKIPLOCK_KINDS. @defaultValue SKIPLOCK_KINDS, else all of `jobs` */
  kinds?: readonly string[];
  /** The invocation's clock (tests). @defaultValue the system clock */
  clock?: Clock;
}
export type RouteHandler = (request: Request) => Promise<Response>;

function fromWebRequest(request: Request): HttpRequest {
  return {
    method: request.method.toUpperCase(),
    header: (name) => request.headers.get(name) ?? undefined,
    readBody: async (maxBytes) => {
      if (!request.body) return '';
      const chunks: Uint8Array[] = [];
      let size = 0;
      const reader = request.body.getReader();
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel().catch(() => {});
          throw tooLarge(maxBytes);
        }
        chunks.push(value);
      }
      return Buffer.concat(chunks).toString('utf8');
    },
  };
}

function toWebResponse(response: HttpResponse): Response {
  return Response.json(response.body, { status: response.status });
}

/** Wraps a route: any failure becomes a JSON error response, never a stack. */
function route(handle: (request: HttpRequest) => Promise<HttpResponse>): RouteHandler {
  return async (request) => {
    try {
      return toWebResponse(await handle(fromWebRequest(request)));
    } catch (err) {
      return toWebResponse(errorResponse(err));
    }
  };
}

/**
 * Vercel cron → worker invocation. Vercel calls crons with GET and
 * `Authorization: Bearer $CRON_SECRET`; the budget is SKIPLOCK_MAX_DURATION_MS (keep it equal
 * to the function's maxDuration in vercel.json).
 */
export function createVercelWorker(jobs: Kinds, options: VercelWorkerOptions = {}): RouteHandler {
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.CRON_SECRET, 'CRON_SECRET');
    const runtime = sharedRuntime(env);
    const remainingMs = options.maxDurationMs ?? runtime.settings.require('worker').maxDurationMs;
    const { queues, kinds, clock } = options;
    return { status: 200, body: { ...(await runWorker(runtime, jobs, { remainingMs, queues, kinds, clock })) } };
  });
}

/** Vercel cron → maintenance tick (CRON_SECRET). */
export function createVercelMaintenance(options: { env?: Env; maxDurationMs?: number } = {}): RouteHandler {
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.CRON_SECRET, 'CRON_SECRET');
    const runtime = sharedRuntime(env);
    const budget = options.maxDurationMs ?? runtime.settings.require('maintenance').maxDurationMs;
    return { status: 200, body: { ...(await runMaintenanceTick(runtime, budget)) } };
  });
}

/** POST enqueue route (bearer SKIPLOCK_ENQUEUE_TOKEN). */
export function createVercelEnqueue(jobs: Kinds, options: { env?: Env } = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.SKIPLOCK_ENQUEUE_TOKEN, 'SKIPLOCK_ENQUEUE_TOKEN');
    const runtime = sharedRuntime(env);
    const body = await readJson(request, runtime.settings.require('enqueue').maxBodyBytes);
    return { status: 200, body: await enqueueFromBody(runtime, registry, body) };
  });
}

/** POST replay route, protected by SKIPLOCK_ADMIN_TOKEN. */
export function createVercelReplay(jobs: Kinds, options: { env?: Env } = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  return route(async (request) => {
    const env = options.env ?? process.env;
    requireBearer(request, env.SKIPLOCK_ADMIN_TOKEN, 'SKIPLOCK_ADMIN_TOKEN');
    const runtime = sharedRuntime(env);
    const body = await readJson(request, runtime.settings.require('replay').maxBodyBytes);
    const result = await replayFromBody(runtime, registry, body, 'vercel:replay');
    return { status: 200, body: { ...result } };
  });
}

export { CONFIG_VARIABLES, FUNCTION_DEFAULTS, loadConfig, type SkiplockConfig } from './config.js';
export { resetSharedRuntime } from './runtime.js';
