import type { Server } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createDenoApp, DENO_CRONS, SUPABASE_LIMITS, serveDeno } from '../../adapters/deno.js';
import { createPlatformApp, type PlatformApp, type PlatformAppOptions } from '../../adapters/platform-routes.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { START_HEADER } from '../../adapters/web/start.js';
import { ConfigError } from '../../base/errors.js';
import { ManualClock } from '../../testing/clock.js';
import { platformJobs } from '../fixtures/platforms/jobs.js';
import { serveRoute } from '../helpers/console.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { jobRow, PLATFORM_SECRETS, platformEnv, queuedSlowRuns, waitForOutcome } from '../helpers/platforms.js';

// The router every one-script platform serves (adapters/platform-routes.ts), on the web core, in
// Node against the local Postgres: what the Workers, Deno and Netlify adapters plug in — each
// request's waitUntil and client, a fetch of its own routes, the budget — and the Supabase budget
// within its CPU time. The platforms' own runtimes run it in platform-{cloudflare,deno,netlify}.
let t: TestContext;
useTestSchema('platform-routes', (ctx) => {
  t = ctx;
});

afterAll(() => resetSharedRuntime());

const env = (extra: Record<string, string> = {}) => platformEnv(t.schema, extra);

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

const queuedRuns = (kind: string, timeoutMs: number, takesMs: number, clock: ManualClock, n: number) =>
  queuedSlowRuns(t, { kind, timeoutMs, takesMs, clock, n });

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

  it('a malformed SKIPLOCK_BASE_URL is reported as configuration by a tick, not thrown as a TypeError', async () => {
    const served = app({ env: env({ SKIPLOCK_BASE_URL: 'not a url' }) });
    const response = await served.tick('worker', keeper());
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({
      error: {
        code: 'config_error',
        message:
          'invalid configuration: SKIPLOCK_BASE_URL must be an absolute http(s) URL such as https://my-app.example.com',
      },
    });
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

  it('behind a gateway that strips SKIPLOCK_BASE_URL’s path, the console’s links and redirects carry it', async () => {
    const served = app({ env: env({ SKIPLOCK_BASE_URL: 'https://project.supabase.example/functions/v1' }) });
    const get = (path: string, cookie = '') =>
      served.fetch(new Request(`https://project.supabase.example${path}`, { headers: { cookie } }), keeper());
    // The function is asked for /admin/jobs; the browser asked for /functions/v1/admin/jobs.
    const away = await get('/admin/jobs');
    expect(away.status).toBe(303);
    expect(away.headers.get('location')).toBe('/functions/v1/admin/login?next=%2Ffunctions%2Fv1%2Fadmin%2Fjobs');
    expect(await (await get('/admin/login')).text()).toContain('action="/functions/v1/admin/login"');
    const login = await served.fetch(
      new Request('https://project.supabase.example/admin/login', {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://project.supabase.example' },
        body: new URLSearchParams({
          token: PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN,
          name: 'ada',
          next: '/functions/v1/admin/jobs',
        }),
      }),
      keeper(),
    );
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/functions/v1/admin/jobs');
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const overview = await (await get('/admin/', cookie)).text();
    expect(overview).toContain('href="/functions/v1/admin/jobs');
    expect(overview).not.toMatch(/(href|action)="\/admin/);
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

describe(`Supabase: its own routes requested below SKIPLOCK_BASE_URL’s path (${testDriver()})`, () => {
  // Supabase's gateway serves the function `skiplock` at /functions/v1/skiplock and hands it the path
  // without /functions/v1; the template's SKIPLOCK_BASE_URL is https://<project>.supabase.co/functions/v1.
  let gateway: { server: Server; origin: string } | undefined;
  const reached: string[] = [];
  let behind: (request: Request) => Promise<Response> = async () => new Response(null, { status: 502 });
  const supabase = async () => {
    gateway ??= await serveRoute(async (request) => {
      const url = new URL(request.url);
      reached.push(url.pathname);
      if (!url.pathname.startsWith('/functions/v1/')) return Response.json({ error: 'no function' }, { status: 404 });
      url.pathname = url.pathname.slice('/functions/v1'.length);
      return behind(new Request(url, request));
    });
    return { origin: gateway.origin, base: `${gateway.origin}/functions/v1` };
  };
  afterAll(() => gateway?.server.close());

  it('an enqueue’s nudge reaches the worker route through the gateway, which runs the job', async () => {
    const { base } = await supabase();
    const ran = keeper();
    const served = createDenoApp(platformJobs, {
      basePath: '/skiplock',
      env: env({ SKIPLOCK_BASE_URL: base, SKIPLOCK_NUDGE_ROUTES: 'nudged=/skiplock/skiplock/worker' }),
      waitUntil: ran.waitUntil,
    });
    behind = (request) => served.fetch(request);
    reached.length = 0;
    const enqueue = await fetch(`${base}/skiplock/skiplock/enqueue`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`,
      },
      body: JSON.stringify({ kind: 'platform-ping', payload: { n: 21 }, options: { queue: 'nudged' } }),
    });
    const id = await idOf(enqueue);
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    await Promise.all(ran.kept);
    expect(reached).toEqual(['/functions/v1/skiplock/skiplock/enqueue', '/functions/v1/skiplock/skiplock/worker']);
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 42 } });
  });

  it('a tick that meets a backlog fans out to the worker route below the base URL’s path', async () => {
    const { base } = await supabase();
    const clock = new ManualClock();
    const slow = await queuedRuns('slow-supabase', 1_000, 100, clock, 100);
    const starts: (string | null)[] = [];
    behind = async (request) => {
      starts.push(request.headers.get(START_HEADER));
      return Response.json({ accepted: true }, { status: 202 });
    };
    reached.length = 0;
    const served = createDenoApp([slow], {
      basePath: '/skiplock',
      env: env({ SKIPLOCK_BASE_URL: base, SKIPLOCK_MAX_INVOCATIONS: '2', SKIPLOCK_CONCURRENCY: '1' }),
      budgetMs: 20_000,
      clock,
    });
    const ticked = keeper();
    const summary = await tickSummary(served, ticked);
    await Promise.all(ticked.kept);
    expect(summary.invocationsStarted).toBeGreaterThan(0);
    expect(starts).toEqual(Array(summary.invocationsStarted).fill('fan-out'));
    expect(new Set(reached)).toEqual(new Set(['/functions/v1/skiplock/skiplock/worker']));
  });
});

describe(`serveDeno’s crons (${testDriver()})`, () => {
  /** Deno's global as serveDeno uses it, with Deno.cron where `cron` is true: what it registered. */
  const inDeno = <T>(run: () => T, cron = true) => {
    const crons: { name: string; schedule: string; handler: () => Promise<void> }[] = [];
    const deno = {
      env: { toObject: () => ({}) },
      serve: () => ({}),
      cron: cron
        ? async (name: string, schedule: string, handler: () => Promise<void>) => {
            crons.push({ name, schedule, handler });
          }
        : undefined,
    };
    (globalThis as { Deno?: unknown }).Deno = deno;
    try {
      return { result: run(), crons };
    } finally {
      delete (globalThis as { Deno?: unknown }).Deno;
    }
  };

  it('runs the worker each minute and maintenance every 10 minutes; maintenance’s tick prunes', async () => {
    const { result: served, crons } = inDeno(() =>
      serveDeno(platformJobs, { env: env({ SKIPLOCK_COMPLETED_RETENTION_HOURS: '0' }) }),
    );
    expect(crons.map(({ name, schedule }) => [name, schedule])).toEqual([
      ['skiplock worker', DENO_CRONS.worker],
      ['skiplock maintenance', '*/10 * * * *'],
    ]);
    const id = await idOf(await served.fetch(enqueueRequest({ n: 5 }), keeper()));
    await crons[0]?.handler();
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('completed');
    await crons[1]?.handler();
    expect(await jobRow(t.admin, t.schema, id)).toBeUndefined();
  });

  it('maintenanceCron: false, or cron: false (Supabase), registers no maintenance; without Deno.cron it is refused', () => {
    const quiet = { env: env() };
    expect(
      inDeno(() => serveDeno(platformJobs, { ...quiet, maintenanceCron: false })).crons.map((c) => c.name),
    ).toEqual(['skiplock worker']);
    expect(inDeno(() => serveDeno(platformJobs, { ...quiet, cron: false })).crons).toEqual([]);
    expect(inDeno(() => serveDeno(platformJobs, quiet), false).crons).toEqual([]);
    expect(() =>
      inDeno(() => serveDeno(platformJobs, { ...quiet, cron: false, maintenanceCron: '*/5 * * * *' }), false),
    ).toThrow(/Deno.cron is not available: run with --unstable-cron, or set maintenanceCron: false/);
  });
});
