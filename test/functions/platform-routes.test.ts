import type { Server } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { createDenoApp, SUPABASE_LIMITS } from '../../adapters/deno.js';
import { createPlatformApp, type PlatformApp, type PlatformAppOptions } from '../../adapters/platform-routes.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { START_HEADER } from '../../adapters/web/start.js';
import { ConfigError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { ManualClock } from '../../testing/clock.js';
import { platformJobs } from '../fixtures/platforms/jobs.js';
import { serveRoute } from '../helpers/console.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { jobRow, PLATFORM_SECRETS } from '../helpers/platforms.js';

// The router every one-script platform serves (adapters/platform-routes.ts), on the web core, in
// Node against the local Postgres: what the Workers, Deno and Netlify adapters plug in — each
// request's waitUntil and client, a fetch of its own routes, the budget — and the Supabase budget
// within its CPU time. The platforms' own runtimes run it in platform-{cloudflare,deno,netlify}.
let t: TestContext;
useTestSchema('platform-routes', (ctx) => {
  t = ctx;
});

afterAll(() => resetSharedRuntime());

const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  ...PLATFORM_SECRETS,
  ...extra,
});

/** Promises handed to a waitUntil, to be awaited by the test (what the platform would keep alive). */
function keeper() {
  const kept: Promise<unknown>[] = [];
  return { kept, waitUntil: (promise: Promise<unknown>) => void kept.push(promise) };
}

const app = (options: Partial<PlatformAppOptions> & { env: Record<string, string> }) =>
  createPlatformApp(platformJobs, {
    platform: 'test',
    budgetMs: 10_000,
    waitUntil: () => {
      throw new Error('the app-wide waitUntil was used where the request brought its own');
    },
    ...options,
  });

const enqueueRequest = (payload: unknown, queue?: string) =>
  new Request('https://app.example/skiplock/enqueue', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`,
    },
    body: JSON.stringify({ kind: 'platform-ping', payload, ...(queue ? { options: { queue } } : {}) }),
  });

const idOf = async (response: Response) => {
  expect(response.status).toBe(200);
  return ((await response.json()) as { results: { id: string }[] }).results[0]?.id as string;
};

/** A kind each of whose runs takes `takesMs` of `clock` (the invocation's), and `n` jobs of it queued. */
async function queuedRuns(kind: string, timeoutMs: number, takesMs: number, clock: ManualClock, n: number) {
  const definition = defineJob({
    kind,
    payload: z.object({ n: z.number() }),
    timeoutMs,
    handler: () => {
      clock.advance(takesMs);
    },
  });
  await createEnqueuer({ schema: t.schema }).enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => definition.with({ n: i })),
  );
  return definition;
}

/** A scheduler's tick of the worker, and its summary. */
const tickSummary = async (served: { tick: PlatformApp['tick'] }, context = keeper()) =>
  (await (await served.tick('worker', context)).json()) as {
    completed: number;
    durationMs: number;
    stoppedBecause: string;
    invocationsStarted?: number;
  };

describe(`createPlatformApp (${testDriver()})`, () => {
  it('a scheduler’s tick runs the worker without a bearer; its route over HTTP still asks for CRON_SECRET', async () => {
    const { CRON_SECRET: _, ...noCronSecret } = env();
    const served = app({ env: noCronSecret });
    const id = await idOf(await served.fetch(enqueueRequest({ n: 2 }), keeper()));
    const response = await served.tick('worker', keeper());
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'completed', result: { doubled: 4 } });
    const route = await served.fetch(new Request('https://app.example/skiplock/worker'), keeper());
    expect(route.status).toBe(401);
  });

  it('a nudge goes through `self` to the worker route, kept alive by the waitUntil of the request that wrote', async () => {
    const sent: { url: string; authorization: string | null; start: string | null }[] = [];
    const worker = keeper();
    const served = app({
      env: env({ SKIPLOCK_NUDGE_ROUTES: 'nudged=/skiplock/worker' }),
      // As a Worker's service binding: the request reaches this app, in its own event.
      self: {
        origin: 'https://self.internal',
        fetch: async (url, init) => {
          const request = new Request(url, init);
          sent.push({
            url: request.url,
            authorization: request.headers.get('authorization'),
            start: request.headers.get(START_HEADER),
          });
          return served.fetch(request, worker);
        },
      },
    });
    const writer = keeper();
    const id = await idOf(await served.fetch(enqueueRequest({ n: 3 }, 'nudged'), writer));
    expect(writer.kept.length).toBeGreaterThan(0);
    await Promise.all(writer.kept);
    expect(sent).toEqual([
      {
        url: 'https://self.internal/skiplock/worker',
        authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}`,
        start: 'nudge',
      },
    ]);
    // The started request answered 202 and ran its invocation under its own waitUntil.
    await Promise.all(worker.kept);
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'completed', result: { doubled: 6 } });
  });

  it('a scheduler’s tick that meets a backlog fans out through `self`, to its own route', async () => {
    const clock = new ManualClock();
    // Each run takes 100 ms of the invocation's clock: 100 of them are 10 s of work for one invocation.
    const slow = await queuedRuns('slow', 1_000, 100, clock, 100);
    const starts: { url: string; start: string | null; authorization: string | null }[] = [];
    const served = createPlatformApp([slow], {
      platform: 'test',
      env: env({ SKIPLOCK_MAX_INVOCATIONS: '2', SKIPLOCK_CONCURRENCY: '1' }),
      budgetMs: 20_000,
      waitUntil: () => {},
      clock,
      self: {
        origin: 'https://self.internal',
        fetch: async (url, init) => {
          const headers = new Headers(init.headers);
          starts.push({ url: url.href, start: headers.get(START_HEADER), authorization: headers.get('authorization') });
          return Response.json({ accepted: true }, { status: 202 });
        },
      },
    });
    const ticked = keeper();
    const summary = await tickSummary(served, ticked);
    await Promise.all(ticked.kept);
    expect(summary.invocationsStarted).toBeGreaterThan(0);
    expect(starts.length).toBe(summary.invocationsStarted);
    expect(starts[0]).toEqual({
      url: 'https://self.internal/skiplock/worker',
      start: 'fan-out',
      authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}`,
    });
  });

  describe('a nudge route given as an absolute URL', () => {
    let server: Server | undefined;
    afterEach(() => server?.close());

    it('is requested with the global fetch, not through `self`', async () => {
      const reached: string[] = [];
      const elsewhere = await serveRoute(async (request) => {
        reached.push(new URL(request.url).pathname);
        return Response.json({ accepted: true }, { status: 202 });
      });
      server = elsewhere.server;
      let throughSelf = 0;
      const served = app({
        env: env({ SKIPLOCK_NUDGE_ROUTES: `other=${elsewhere.origin}/reports-worker` }),
        self: {
          origin: 'https://self.internal',
          fetch: async () => {
            throughSelf++;
            return new Response(null, { status: 202 });
          },
        },
      });
      const writer = keeper();
      await idOf(await served.fetch(enqueueRequest({ n: 1 }, 'other'), writer));
      await Promise.all(writer.kept);
      expect(reached).toEqual(['/reports-worker']);
      expect(throughSelf).toBe(0);
    });
  });

  it('the console counts a login by the client address the platform gives, not by proxy headers', async () => {
    const served = app({ env: env(), clientOf: (request) => request.headers.get('x-platform-client') ?? undefined });
    const login = (headers: Record<string, string>, client?: string) =>
      served.fetch(
        new Request('https://app.example/admin/login', {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://app.example', ...headers },
          body: new URLSearchParams({ token: 'not-the-token-0123456789abcdef', name: 'eve', next: '/admin/' }),
        }),
        { client },
      );
    expect((await login({ 'x-forwarded-for': '198.51.100.1' }, '203.0.113.5')).status).toBe(401);
    expect((await login({ 'x-platform-client': '203.0.113.6', 'x-real-ip': '198.51.100.2' })).status).toBe(401);
    const { rows } = await t.admin.query(
      `select client from "${t.schema}".console_logins where client like 'ip:%' order by client`,
    );
    expect(rows.map((r) => r.client)).toEqual(['ip:203.0.113.5', 'ip:203.0.113.6']);
  });

  it('a replay over its route is recorded as the platform’s', async () => {
    const served = app({ env: env() });
    const fails = await idOf(
      await served.fetch(
        new Request('https://app.example/skiplock/enqueue', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`,
          },
          body: JSON.stringify({ kind: 'platform-fails', payload: { why: 'no' } }),
        }),
        keeper(),
      ),
    );
    await served.tick('worker', keeper());
    const replay = await served.fetch(
      new Request('https://app.example/skiplock/replay', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN}`,
        },
        body: JSON.stringify({ ids: [fails] }),
      }),
      keeper(),
    );
    expect(replay.status).toBe(200);
    const { rows } = await t.admin.query(`select replayed_by from "${t.schema}".jobs where id = $1`, [fails]);
    expect(rows[0].replayed_by).toBe('test:replay');
  });
});

describe(`Supabase: each invocation within its 2 s of CPU time (${testDriver()})`, () => {
  const edge = keeper();
  const onSupabase = <T>(run: () => T): T => {
    (globalThis as { EdgeRuntime?: unknown }).EdgeRuntime = { waitUntil: edge.waitUntil };
    try {
      return run();
    } finally {
      delete (globalThis as { EdgeRuntime?: unknown }).EdgeRuntime;
    }
  };
  const clock = new ManualClock();
  // Each run takes 400 ms of the invocation's clock, of its 500 ms timeout; ten are queued.
  const quickRuns = () => queuedRuns('quick', 500, 400, clock, 10);
  const fewer = { SKIPLOCK_SAFETY_MARGIN_MS: '100', SKIPLOCK_CONCURRENCY: '1', SKIPLOCK_BATCH_SIZE: '1' };

  it('stops claiming so that its last attempt ends within the 2 s (wall time alone would allow all ten)', async () => {
    const quick = await quickRuns();
    const summary = await tickSummary(onSupabase(() => createDenoApp([quick], { env: env(fewer), clock })));
    // Started at 0, 0.4, 0.8 and 1.2 s, a 500 ms attempt ends by 1.7 s ≤ 2 s − 100 ms; at 1.6 s it would not.
    expect(summary).toMatchObject({ completed: 4, stoppedBecause: 'deadline' });
    expect(summary.durationMs).toBeLessThanOrEqual(SUPABASE_LIMITS.cpuMs);
  });

  it('with cpuMs: false, wall time alone bounds it: all ten run', async () => {
    const quick = await quickRuns();
    const served = onSupabase(() => createDenoApp([quick], { env: env(fewer), clock, cpuMs: false }));
    const summary = await tickSummary(served);
    expect(summary).toMatchObject({ completed: 10, stoppedBecause: 'drained' });
    expect(summary.durationMs).toBeGreaterThan(SUPABASE_LIMITS.cpuMs);
  });

  it('refuses, as the app is made, a kind that cannot fit the CPU time, saying that no timeout raises it', () => {
    let refused: unknown;
    try {
      onSupabase(() => createDenoApp(platformJobs, { env: env() }));
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as Error).message).toMatch(/platform-ping \(timeoutMs 5000\).*2000 ms of CPU time a request gets/);
    // Elsewhere (Deno Deploy), the same kinds fit the configured wall-time budget.
    expect(() => createDenoApp(platformJobs, { env: env() })).not.toThrow();
  });

  it('refuses a CPU limit too small to run a worker, as on Cloudflare', () => {
    expect(() => createDenoApp(platformJobs, { env: env(fewer), cpuMs: 50 })).toThrow(
      /cpuMs 50 is too little CPU time/,
    );
  });
});
