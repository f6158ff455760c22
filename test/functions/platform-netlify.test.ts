import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import {
  createNetlifyBackgroundWorker,
  createNetlifyNudger,
  createNetlifyRoutes,
  createNetlifyScheduledMaintenance,
  createNetlifyScheduledWorker,
  type NetlifyContext,
  type NetlifyFunction,
} from '../../adapters/netlify.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { START_HEADER } from '../../adapters/web/start.js';
import { ConfigError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { ManualClock } from '../../testing/clock.js';
import { ping, platformJobs } from '../fixtures/platforms/jobs.js';
import { serveRoute } from '../helpers/console.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import {
  httpRequests,
  jobRow,
  PLATFORM_SECRETS,
  platformEnv,
  queuedSlowRuns,
  waitForOutcome,
} from '../helpers/platforms.js';
import { captureStdout } from '../helpers/stdout.js';

// skiplock/netlify's three functions (test/fixtures/platforms/netlify/functions/ holds them as an app
// writes them), called as Netlify's Node runtime calls a v2 function: a Web Request and a context
// with waitUntil. A background function is answered 202 by Netlify before it runs; here too.
// Netlify's own local tooling builds and invokes the functions `skiplock init netlify` writes in
// test/e2e/init-netlify.test.ts (installed apart, with TypeScript 5: test/helpers/netlify-tools.ts).
let t: TestContext;
useTestSchema('platform-netlify', (ctx) => {
  t = ctx;
});

let server: Server;
let origin: string;
let env: Record<string, string>;
let scheduled: NetlifyFunction;
const pending: Promise<unknown>[] = [];
const context: NetlifyContext = { waitUntil: (promise) => void pending.push(promise) };

beforeAll(async () => {
  let routes: NetlifyFunction | undefined;
  let background: NetlifyFunction | undefined;
  const served = await serveRoute(async (request) => {
    const { pathname } = new URL(request.url);
    if (pathname === '/.netlify/functions/skiplock-worker-background') {
      pending.push((background as NetlifyFunction)(request, context));
      return new Response(null, { status: 202 });
    }
    return (routes as NetlifyFunction)(request, context);
  });
  server = served.server;
  origin = served.origin;
  env = {
    DATABASE_URL: databaseUrl(),
    SKIPLOCK_DRIVER: testDriver(),
    SKIPLOCK_SCHEMA: t.schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_BASE_URL: origin,
    SKIPLOCK_NUDGE_ROUTES: 'nudged=/.netlify/functions/skiplock-worker-background',
    ...PLATFORM_SECRETS,
  };
  routes = createNetlifyRoutes(platformJobs, { env });
  background = createNetlifyBackgroundWorker(platformJobs, { env });
  scheduled = createNetlifyScheduledWorker(platformJobs, { env });
});

afterAll(async () => {
  await Promise.allSettled(pending);
  server?.close();
  await resetSharedRuntime();
});

const { post, enqueue } = httpRequests(() => origin);
/** Netlify's scheduler calls a scheduled function with a POST whose body says the next run. */
const tick = () =>
  scheduled(
    new Request('https://site.netlify.app/.netlify/functions/skiplock-worker', {
      method: 'POST',
      body: JSON.stringify({ next_run: new Date().toISOString() }),
    }),
    context,
  );

describe(`skiplock/netlify (${testDriver()})`, () => {
  it('the scheduled function runs an enqueued job', async () => {
    const id = await enqueue('platform-ping', { n: 3 });
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('queued');
    const response = await tick();
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ claimed: 1 });
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'completed', result: { doubled: 6 } });
  });

  it("a function of the app's own starts the background worker with createNetlifyNudger", async () => {
    const { id } = await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 12 }, { queue: 'nudged' });
    const skiplock = createNetlifyNudger({ env });
    await skiplock.nudge(['nudged'], new Request(`${origin}/.netlify/functions/signup`), context);
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 24 } });
  });

  it('an enqueue nudges the background function, which runs the job at once', async () => {
    const id = await enqueue('platform-ping', { n: 8 }, 'nudged');
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 16 } });
  });

  it('the background function refuses a request without CRON_SECRET, and its log says so (its caller got 202)', async () => {
    const { result: response, lines } = await captureStdout(() =>
      createNetlifyBackgroundWorker(platformJobs, {
        env: { DATABASE_URL: databaseUrl(), SKIPLOCK_SCHEMA: t.schema, ...PLATFORM_SECRETS },
      })(
        new Request(`${origin}/.netlify/functions/skiplock-worker-background`, {
          headers: { authorization: 'Bearer not-the-cron-secret' },
        }),
        context,
      ),
    );
    expect(response.status).toBe(401);
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      { level: 'warn', msg: 'background_start_refused', status: 401, error: 'missing or wrong bearer token' },
    ]);
    expect(lines.join('')).not.toContain('not-the-cron-secret');
  });

  it('a dead job is replayed through the routes function and runs again on the next tick', async () => {
    const id = await enqueue('platform-fails', { why: 'no such customer' });
    await tick();
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('dead');
    const replay = await post('/skiplock/replay', PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [id] });
    expect(replay.status).toBe(200);
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('queued');
    expect(await (await tick()).json()).toMatchObject({ claimed: 1 });
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('dead');
  });

  it('the console logs in with the admin token', async () => {
    const login = await fetch(`${origin}/admin/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
      body: new URLSearchParams({
        token: PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN,
        name: 'ada',
        next: '/admin/',
      }).toString(),
    });
    expect(login.status).toBe(303);
  });
});

describe(`skiplock/netlify: which function runs what (${testDriver()})`, () => {
  const env = (extra: Record<string, string> = {}) => platformEnv(t.schema, extra);
  /** A kind whose 20 s timeout fits the scheduled and background workers, not the routes function's 10 s. */
  const report = defineJob({
    kind: 'netlify-report',
    payload: z.object({ id: z.string() }),
    timeoutMs: 20_000,
    handler: () => {},
  });

  it('fan-out from the background and the scheduled worker starts the background function, not the routes function', async () => {
    const backgroundPath = '/.netlify/functions/skiplock-worker-background';
    const reached: { path: string; start: string | null }[] = [];
    const site = await serveRoute(async (request) => {
      reached.push({ path: new URL(request.url).pathname, start: request.headers.get(START_HEADER) });
      return Response.json({ accepted: true }, { status: 202 });
    });
    try {
      const clock = new ManualClock();
      // A backlog of 100 runs of 100 ms each (the invocation's clock): work for more than one invocation.
      const backlog = () => queuedSlowRuns(t, { kind: 'netlify-slow', timeoutMs: 1_000, takesMs: 100, clock, n: 100 });
      const options = {
        env: env({ SKIPLOCK_BASE_URL: site.origin, SKIPLOCK_MAX_INVOCATIONS: '2', SKIPLOCK_CONCURRENCY: '1' }),
        clock,
        budgetMs: 20_000,
      };
      const slow = await backlog();
      // Netlify has answered the nudge 202 already; the function runs the invocation in its own time.
      const fromBackground = await createNetlifyBackgroundWorker([slow], options)(
        new Request(`${site.origin}${backgroundPath}`, {
          headers: { authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}`, [START_HEADER]: 'nudge' },
        }),
        context,
      );
      await backlog();
      const fromScheduled = await createNetlifyScheduledWorker([slow], options)(
        new Request('https://site.netlify.app/.netlify/functions/skiplock-worker', { method: 'POST' }),
        context,
      );
      await Promise.allSettled(pending);
      const started = [fromBackground, fromScheduled].map(async (response) => {
        expect(response.status).toBe(200);
        return ((await response.json()) as { invocationsStarted?: number }).invocationsStarted ?? 0;
      });
      const [background = 0, scheduledRun = 0] = await Promise.all(started);
      expect(background).toBeGreaterThan(0);
      expect(scheduledRun).toBeGreaterThan(0);
      expect(reached).toEqual(Array(background + scheduledRun).fill({ path: backgroundPath, start: 'fan-out' }));
    } finally {
      site.server.close();
    }
  });

  it('the routes function without its worker route takes any kind; with it, a kind over its 10 s is refused', () => {
    expect(() => createNetlifyRoutes([report], { env: env(), routes: { worker: false } })).not.toThrow();
    expect(() => createNetlifyRoutes([report], { env: env() })).toThrow(ConfigError);
  });

  it('the scheduled maintenance function runs a maintenance tick without a secret, whatever the kinds', async () => {
    const maintenance = createNetlifyScheduledMaintenance([report], { env: env() });
    const response = await maintenance(
      new Request('https://site.netlify.app/.netlify/functions/skiplock-maintenance', {
        method: 'POST',
        body: JSON.stringify({ next_run: new Date().toISOString() }),
      }),
      context,
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ pruneFinished: true });
  });
});
