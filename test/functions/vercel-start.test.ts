// Nudges and fan-out on Vercel, over real HTTP: the routes are served on 127.0.0.1 by a small
// server that does what Vercel's runtime does for them — a Web Request per request, and a request
// context whose waitUntil keeps work running after the response (read by @vercel/functions
// through the same global Vercel installs). The starters' requests really travel.
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import {
  createVercelEnqueue,
  createVercelReplay,
  createVercelWorker,
  type RouteHandler,
} from '../../adapters/vercel.js';
import { START_HEADER } from '../../adapters/vercel-start.js';
import { defineJob } from '../../core/jobs.js';
import type { InvocationSummary } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import {
  configureNeonForLocalPostgres,
  databaseUrl,
  type TestContext,
  testDriver,
  useTestSchema,
} from '../helpers/db.js';
import { enqueuerFor, pingKind } from '../helpers/kinds.js';
import { captureStdout } from '../helpers/stdout.js';

let t: TestContext;
useTestSchema('functions-vercel-start', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const CRON_SECRET = 'cron-secret-0123456789abcdef00';
const TOKEN = 'enqueue-token-0123456789abcdef';

// Vercel's runtime exposes the current request's context (its waitUntil) at this global.
const REQUEST_CONTEXT = Symbol.for('@vercel/request-context');
const requestContext = new AsyncLocalStorage<{ waitUntil(promise: Promise<unknown>): void }>();
beforeAll(() => {
  configureNeonForLocalPostgres();
  (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT] = { get: () => requestContext.getStore() };
});
afterAll(() => {
  delete (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT];
});

interface Served {
  path: string;
  method: string;
  start: string | undefined;
  authorized: boolean;
  status: number;
  body: string;
}

function toRequest(req: IncomingMessage, origin: string, body: Buffer): Request {
  const headers = new Headers();
  for (const [key, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(key, value);
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(new URL(req.url ?? '/', origin), {
    method: req.method,
    headers,
    body: hasBody ? new Uint8Array(body) : undefined,
  });
}

/**
 * Serves `routes` on 127.0.0.1 as Vercel would: the response goes out as soon as the handler
 * returns; what the handler gave to waitUntil runs on (settled() waits for all of it).
 */
async function serve(routes: Record<string, Record<string, RouteHandler>>) {
  const served: Served[] = [];
  const arrivals: { path: string; start?: string; at?: number }[] = [];
  const waiting: { check: () => boolean; resolve: () => void }[] = [];
  const background = new Set<Promise<unknown>>();
  const wake = () => {
    for (const w of waiting.splice(0)) {
      if (w.check()) w.resolve();
      else waiting.push(w);
    }
  };
  let onArrival: (path: string) => number | undefined = () => undefined;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      const start = req.headers[START_HEADER] as string | undefined;
      arrivals.push({ path, start, at: onArrival(path) });
      wake();
      const handler = routes[path]?.[req.method ?? 'GET'];
      if (!handler) {
        res.writeHead(404).end();
        return;
      }
      const context = {
        waitUntil: (promise: Promise<unknown>) => {
          const tracked = promise.catch(() => {}).finally(() => background.delete(tracked));
          background.add(tracked);
        },
      };
      const request = toRequest(req, `http://${req.headers.host}`, Buffer.concat(chunks));
      const response = await requestContext.run(context, () => handler(request));
      const body = await response.text();
      served.push({
        path,
        method: req.method ?? 'GET',
        start,
        authorized: req.headers.authorization === `Bearer ${CRON_SECRET}`,
        status: response.status,
        body,
      });
      res.writeHead(response.status, { 'content-type': 'application/json' }).end(body);
      wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    served,
    arrivals,
    /** Records `at` (e.g. a manual clock's now) with each arrival at `path`. */
    stamp(fn: (path: string) => number | undefined) {
      onArrival = fn;
    },
    /** Resolves once `count` requests have arrived at `path`. */
    arrived: (path: string, count: number) =>
      new Promise<void>((resolve) => {
        const check = () => arrivals.filter((a) => a.path === path).length >= count;
        if (check()) resolve();
        else waiting.push({ check, resolve });
      }),
    /** Waits until everything handed to waitUntil (and what that started) has ended. */
    settled: async () => {
      while (background.size > 0) await Promise.allSettled([...background]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const post = (origin: string, body: unknown, token = TOKEN) =>
  fetch(`${origin}/api/enqueue`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });

const { ping, ran } = pingKind();
const ADMIN = 'admin-token-for-the-replay-nudge';
const baseEnv = (extra: Record<string, string | undefined> = {}): Record<string, string | undefined> => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_ENQUEUE_TOKEN: TOKEN,
  CRON_SECRET,
  SKIPLOCK_NUDGE_ROUTES: 'pings=/api/worker',
  ...extra,
});
const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;
/** A worker route that only accepts (202): it records the start and runs nothing. */
const acceptOnly: RouteHandler = async () => Response.json({ accepted: true }, { status: 202 });

describe(`Vercel nudges over HTTP (${testDriver()})`, () => {
  it('a job enqueued through the enqueue route is completed by the worker route it nudged, with no cron request', async () => {
    ran.length = 0;
    const env = baseEnv();
    const server = await serve({
      '/api/enqueue': { POST: createVercelEnqueue([ping], { env }) },
      '/api/worker': { GET: createVercelWorker([ping], { env, maxDurationMs: 30_000 }) },
    });
    try {
      const response = await post(server.origin, { kind: 'ping', payload: { n: 1 } });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ results: [{ outcome: 'inserted' }] });
      await server.settled();
    } finally {
      await server.close();
    }
    // The worker was started by the nudge (202 at once, the run after the response), never by a cron.
    expect(server.served.map(({ path, start, authorized, status }) => ({ path, start, authorized, status }))).toEqual([
      { path: '/api/enqueue', start: undefined, authorized: false, status: 200 },
      { path: '/api/worker', start: 'nudge', authorized: true, status: 202 },
    ]);
    expect(ran).toEqual([1]);
    expect(await states()).toEqual([{ state: 'completed', n: 1 }]);
  });

  it('a dead job replayed through the replay route is completed by the worker route it nudged, with no cron request', async () => {
    ran.length = 0;
    const env = baseEnv({ SKIPLOCK_ADMIN_TOKEN: ADMIN });
    await t.admin.query(
      `insert into "${t.schema}".jobs (kind, queue, payload, state, dead_reason, finished_at, attempt)
       values ('ping', 'pings', '{"n": 7}', 'dead', 'max_attempts', now(), 3)`,
    );
    const server = await serve({
      '/api/replay': { POST: createVercelReplay([ping], { env }) },
      '/api/worker': { GET: createVercelWorker([ping], { env, maxDurationMs: 30_000 }) },
    });
    try {
      const response = await fetch(`${server.origin}/api/replay`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
        body: JSON.stringify({ all: true }),
      });
      expect(response.status).toBe(200);
      await server.settled();
    } finally {
      await server.close();
    }
    expect(server.served.map(({ path, start, status }) => ({ path, start, status }))).toEqual([
      { path: '/api/replay', start: undefined, status: 200 },
      { path: '/api/worker', start: 'nudge', status: 202 },
    ]);
    expect(ran).toEqual([7]);
    expect(await states()).toEqual([{ state: 'completed', n: 1 }]);
  });

  it('200 enqueues at once start one worker request, and one more when the coalescing window ends', async () => {
    const clock = new ManualClock();
    const env = baseEnv();
    const server = await serve({
      '/api/enqueue': { POST: createVercelEnqueue([ping], { env, clock }) },
      '/api/worker': { GET: acceptOnly },
    });
    server.stamp((path) => (path === '/api/worker' ? clock.now() : undefined));
    const startedAt = clock.now();
    try {
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, n) => post(server.origin, { kind: 'ping', payload: { n } })),
      );
      for (const response of responses) expect(response.status).toBe(200);
      await server.arrived('/api/worker', 1);
      clock.advance(1_000); // the window ends: one start for what came meanwhile
      await server.settled(); // every start handed to waitUntil, and the window's timer
    } finally {
      await server.close();
    }
    const starts = server.arrivals.filter((a) => a.path === '/api/worker');
    // Exactly two, one per window: a start per enqueue would show 200 stamped at the first instant.
    expect(starts).toEqual([
      { path: '/api/worker', start: 'nudge', at: startedAt },
      { path: '/api/worker', start: 'nudge', at: startedAt + 1_000 },
    ]);
    expect(await states()).toEqual([{ state: 'queued', n: 200 }]);
  });

  it('the nudge target is down: every enqueue still answers 200, and a cron request then runs the jobs', async () => {
    ran.length = 0;
    // A port nothing listens on any more.
    const dead = await serve({});
    await dead.close();
    const env = baseEnv({ SKIPLOCK_BASE_URL: dead.origin, SKIPLOCK_LOG_LEVEL: 'warn' });
    const clock = new ManualClock();
    const server = await serve({
      '/api/enqueue': { POST: createVercelEnqueue([ping], { env, clock }) },
      '/api/worker': { GET: createVercelWorker([ping], { env, maxDurationMs: 30_000 }) },
    });
    try {
      const { lines } = await captureStdout(async () => {
        for (const n of [1, 2, 3]) {
          const response = await post(server.origin, { kind: 'ping', payload: { n } });
          expect(response.status).toBe(200);
          expect(await response.json()).toMatchObject({ results: [{ outcome: 'inserted' }] });
        }
        clock.advance(1_000); // the window's one more start
        await server.settled(); // the failed starts were logged
      });
      const failures = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'nudge_failed');
      expect(failures).toHaveLength(2);
      for (const failure of failures) {
        expect(failure).toMatchObject({ route: `${dead.origin}/api/worker`, code: 'ECONNREFUSED' });
      }
      expect(server.arrivals.filter((a) => a.path === '/api/worker')).toEqual([]);
      expect(await states()).toEqual([{ state: 'queued', n: 3 }]);

      // The cron: Vercel's GET with the bearer, no start header; it answers with the summary.
      const cron = await fetch(`${server.origin}/api/worker`, { headers: { authorization: `Bearer ${CRON_SECRET}` } });
      expect(cron.status).toBe(200);
      expect(await cron.json()).toMatchObject({ claimed: 3, completed: 3, stoppedBecause: 'drained' });
    } finally {
      await server.close();
    }
    expect(ran.sort()).toEqual([1, 2, 3]);
    expect(await states()).toEqual([{ state: 'completed', n: 3 }]);
  });

  it.each([
    ['wrong', 'not-the-cron-secret-000000000'],
    ['missing', undefined],
    ['too short', 'short-secret'],
  ])(
    'a %s CRON_SECRET on the starter side: the enqueue answers 200, the failure is logged, no secret leaks',
    async (_name, secret) => {
      const enqueueEnv = baseEnv({ CRON_SECRET: secret, SKIPLOCK_LOG_LEVEL: 'warn' });
      const server = await serve({
        '/api/enqueue': { POST: createVercelEnqueue([ping], { env: enqueueEnv }) },
        // The worker route knows the right secret (and refuses before touching the database).
        '/api/worker': { GET: createVercelWorker([ping], { env: baseEnv() }) },
      });
      let bodies: string[] = [];
      const { lines } = await captureStdout(async () => {
        try {
          const response = await post(server.origin, { kind: 'ping', payload: { n: 1 } });
          bodies.push(await response.text());
          expect(response.status).toBe(200);
          await server.settled();
        } finally {
          await server.close();
        }
      });
      bodies = [...bodies, ...server.served.map((s) => s.body)];
      const failure = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'nudge_failed');
      if (secret === 'not-the-cron-secret-000000000') {
        // Sent, and refused by the worker route: the log says so by status and code.
        expect(failure).toMatchObject({ route: `${server.origin}/api/worker`, status: 401, code: 'unauthorized' });
        expect(server.served.find((s) => s.path === '/api/worker')).toMatchObject({ status: 401, authorized: false });
      } else {
        // Never sent: the starter knows the route would refuse it.
        expect(failure?.error).toMatch(/CRON_SECRET must be set \(at least 16 characters\)/);
        expect(server.arrivals.filter((a) => a.path === '/api/worker')).toEqual([]);
      }
      for (const text of [...lines, ...bodies]) {
        expect(text).not.toContain(CRON_SECRET);
        if (secret) expect(text).not.toContain(secret);
      }
      expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    },
  );
});

describe(`Vercel fan-out over HTTP (${testDriver()})`, () => {
  it('a backlog makes the worker route request itself, never more than SKIPLOCK_MAX_INVOCATIONS registered at once; every job completes', async () => {
    // Each job takes 100 ms of the invocations' clock: one invocation finishes 10 a second.
    const clock = new ManualClock();
    const claims = new Set<string>();
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let heldAtOnce: { n: number; invocations: number } | undefined;
    // The first batch runs free (the cron's invocation measures its rate, then fans out); from its
    // second batch on, handlers wait until the three started invocations have claimed too: then
    // four invocations run at once, and the test counts the slots held.
    const slow = defineJob({
      kind: 'slow',
      payload: z.object({ n: z.number() }),
      timeoutMs: 60_000,
      handler: async (_payload, ctx) => {
        claims.add(ctx.leaseToken);
        if (claims.size >= 2) {
          if (claims.size === 5 && !heldAtOnce) {
            heldAtOnce = { n: -1, invocations: -1 };
            const { rows } = await t.admin.query(
              `select count(*)::int as n, count(distinct invocation_id)::int as invocations from "${t.schema}".invocations`,
            );
            heldAtOnce = rows[0];
            release();
          }
          await released;
        }
        clock.advance(100);
      },
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 300 }, (_, n) => slow.with({ n })),
    );
    const env = baseEnv({ SKIPLOCK_CONCURRENCY: '10', SKIPLOCK_MAX_INVOCATIONS: '4' });
    const server = await serve({
      '/api/worker': { GET: createVercelWorker([slow], { env, clock, maxDurationMs: 600_000 }) },
    });
    let summary: InvocationSummary;
    try {
      const cron = await fetch(`${server.origin}/api/worker`, { headers: { authorization: `Bearer ${CRON_SECRET}` } });
      expect(cron.status).toBe(200);
      summary = (await cron.json()) as InvocationSummary;
      await server.settled(); // the invocations it started, and those they started
    } finally {
      await server.close();
    }
    // Four slots held by four invocations at the moment the test held them all; never a fifth.
    expect(heldAtOnce).toEqual({ n: 4, invocations: 4 });
    const starts = server.served.filter((s) => s.start === 'fan-out');
    expect(starts.length).toBeGreaterThanOrEqual(3);
    for (const s of starts) expect(s).toMatchObject({ path: '/api/worker', authorized: true, status: 202 });
    expect(summary).toMatchObject({ stoppedBecause: 'drained' });
    expect(await states()).toEqual([{ state: 'completed', n: 300 }]);
    const { rows: left } = await t.admin.query(`select count(*)::int as n from "${t.schema}".invocations`);
    expect(left[0].n).toBe(0); // every slot was given back
  });
});
