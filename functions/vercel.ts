import type { JobDefinition } from '../core/jobs.js';
import { JobRegistry } from '../core/jobs.js';
import { errorResponse, type HttpRequest, type HttpResponse, readJson, requireBearer, tooLarge } from './http.js';
import { enqueueFromBody, replayFromBody, runMaintenanceTick, runWorker } from './operations.js';
import { sharedRuntime } from './runtime.js';

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
type Env = Record<string, string | undefined>;
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
export function createVercelWorker(jobs: Kinds, options: { env?: Env } = {}): RouteHandler {
  return route(async (request) => {
    const runtime = sharedRuntime(options.env ?? process.env);
    requireBearer(request, runtime.config.cronSecret, 'CRON_SECRET');
    return { status: 200, body: { ...(await runWorker(runtime, jobs, runtime.config.maxDurationMs)) } };
  });
}

/** Vercel cron → maintenance tick (CRON_SECRET). */
export function createVercelMaintenance(options: { env?: Env } = {}): RouteHandler {
  return route(async (request) => {
    const runtime = sharedRuntime(options.env ?? process.env);
    requireBearer(request, runtime.config.cronSecret, 'CRON_SECRET');
    return { status: 200, body: { ...(await runMaintenanceTick(runtime, runtime.config.maxDurationMs)) } };
  });
}

/** POST enqueue route (bearer SKIPLOCK_ENQUEUE_TOKEN). */
export function createVercelEnqueue(jobs: Kinds, options: { env?: Env } = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  return route(async (request) => {
    const runtime = sharedRuntime(options.env ?? process.env);
    requireBearer(request, runtime.config.enqueueToken, 'SKIPLOCK_ENQUEUE_TOKEN');
    const body = await readJson(request, runtime.config.maxBodyBytes);
    return { status: 200, body: await enqueueFromBody(runtime, registry, body) };
  });
}

/** POST replay route, protected by SKIPLOCK_ADMIN_TOKEN. */
export function createVercelReplay(jobs: Kinds, options: { env?: Env } = {}): RouteHandler {
  const registry = new JobRegistry(jobs);
  return route(async (request) => {
    const runtime = sharedRuntime(options.env ?? process.env);
    requireBearer(request, runtime.config.adminToken, 'SKIPLOCK_ADMIN_TOKEN');
    const body = await readJson(request, runtime.config.maxBodyBytes);
    const result = await replayFromBody(runtime, registry, body, 'vercel:replay');
    return { status: 200, body: { ...result } };
  });
}
