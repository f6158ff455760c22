import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPlatformApp, type PlatformApp } from '../../adapters/platform-routes.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { platformJobs } from '../fixtures/platforms/jobs.js';
import {
  databaseUrl,
  forgetNeonOptions,
  type TestContext,
  testDriver,
  testNeonEnv,
  useTestSchema,
} from '../helpers/db.js';
import { jobRow, PLATFORM_SECRETS } from '../helpers/platforms.js';

// The router every one-script platform serves (adapters/platform-routes.ts: Workers, Deno, Netlify,
// and a Bun server), on each driver, in whatever runtime runs this file: test/drivers is also run in
// Bun (test/e2e/bun-drivers.test.ts). A tick runs a job, a nudge through the app's own route runs one
// at once, a replay runs a dead job again, and the console logs in — the whole of a platform's
// contract, with the runtime's own Request, Response, fetch and crypto.
let t: TestContext;
useTestSchema('drivers_platform_app', (ctx) => {
  t = ctx;
});
beforeEach(() => forgetNeonOptions());
afterEach(() => resetSharedRuntime());
afterAll(() => resetSharedRuntime());

/** Promises handed to a waitUntil: what the platform keeps alive after the response. */
function keeper() {
  const kept: Promise<unknown>[] = [];
  return { kept, waitUntil: (promise: Promise<unknown>) => void kept.push(promise), settled: () => Promise.all(kept) };
}

function platformApp(): { app: PlatformApp; ran: ReturnType<typeof keeper>[] } {
  const ran: ReturnType<typeof keeper>[] = [];
  const app: PlatformApp = createPlatformApp(platformJobs, {
    platform: 'test',
    env: {
      DATABASE_URL: databaseUrl(),
      SKIPLOCK_DRIVER: testDriver(),
      SKIPLOCK_SCHEMA: t.schema,
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_NUDGE_ROUTES: 'nudged=/skiplock/worker',
      ...testNeonEnv(),
      ...PLATFORM_SECRETS,
    },
    budgetMs: 10_000,
    waitUntil: () => {
      throw new Error('the app-wide waitUntil was used where the request brought its own');
    },
    // Its own routes, as a service binding reaches them: each request in an event of its own.
    self: {
      origin: 'https://self.internal',
      fetch: async (url, init) => {
        const context = keeper();
        ran.push(context);
        return app.fetch(new Request(url, init), context);
      },
    },
  });
  return { app, ran };
}

const post = (path: string, token: string, body: unknown) =>
  new Request(`https://app.example${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });

async function enqueue(app: PlatformApp, kind: string, payload: unknown, queue?: string) {
  const context = keeper();
  const response = await app.fetch(
    post('/skiplock/enqueue', PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN, {
      kind,
      payload,
      ...(queue ? { options: { queue } } : {}),
    }),
    context,
  );
  expect(response.status).toBe(200);
  await context.settled();
  return ((await response.json()) as { results: { id: string }[] }).results[0]?.id as string;
}

describe(`a one-script platform app (${testDriver()}, ${process.versions.bun ? `bun ${process.versions.bun}` : 'node'})`, () => {
  it('a tick runs a queued job; a nudge runs one on a nudged queue at once; a replay runs a dead job again', async () => {
    const { app, ran } = platformApp();
    const ticked = await enqueue(app, 'platform-ping', { n: 4 });
    expect(await jobRow(t.admin, t.schema, ticked)).toMatchObject({ state: 'queued' });
    expect(ran).toHaveLength(0); // not a nudged queue: it waits for the scheduler
    const tick = keeper();
    const summary = await (await app.tick('worker', tick)).json();
    await tick.settled();
    expect(summary).toMatchObject({ claimed: 1, completed: 1 });
    expect(await jobRow(t.admin, t.schema, ticked)).toMatchObject({ state: 'completed', result: { doubled: 8 } });

    const nudged = await enqueue(app, 'platform-ping', { n: 5 }, 'nudged');
    expect(ran).toHaveLength(1); // the nudge reached the worker route
    await Promise.all(ran.map((context) => context.settled()));
    expect(await jobRow(t.admin, t.schema, nudged)).toMatchObject({ state: 'completed', attempt: 1 });

    const dead = await enqueue(app, 'platform-fails', { why: 'no such customer' }, 'nudged');
    await Promise.all(ran.map((context) => context.settled()));
    expect(await jobRow(t.admin, t.schema, dead)).toMatchObject({ state: 'dead', attempt: 1 });
    const replay = keeper();
    const replayed = await app.fetch(
      post('/skiplock/replay', PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [dead] }),
      replay,
    );
    expect(replayed.status).toBe(200);
    await replay.settled();
    const again = keeper();
    await app.tick('worker', again);
    await again.settled();
    await Promise.all(ran.map((context) => context.settled()));
    // It ran again and failed again: dead once more (a replay starts its attempts over), with both
    // runs' errors and one replay recorded.
    const { rows } = await t.admin.query(
      `select state, attempt, replay_count, jsonb_array_length(errors) as errors from "${t.schema}".jobs where id = $1`,
      [dead],
    );
    expect(rows[0]).toEqual({ state: 'dead', attempt: 1, replay_count: 1, errors: 2 });
  });

  it('the console logs in with the admin token and shows the overview; a wrong token is refused', async () => {
    const { app } = platformApp();
    const login = (token: string) =>
      app.fetch(
        new Request('https://app.example/admin/login', {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://app.example' },
          body: new URLSearchParams({ token, name: 'ada', next: '/admin/' }).toString(),
        }),
        keeper(),
      );
    const refused = await login('not-the-admin-token-0123456789abcdef');
    expect(refused.headers.get('set-cookie')).toBeNull();
    const accepted = await login(PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN);
    expect(accepted.status).toBe(303);
    const cookie = (accepted.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    expect(cookie).not.toBe('');
    const page = await app.fetch(new Request('https://app.example/admin/', { headers: { cookie } }), keeper());
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Error rate per minute');
  });
});
