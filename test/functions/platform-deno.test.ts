import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createSignalToken } from '../../core/signal-tokens.js';
import { freePort } from '../../scripts/local-postgres.js';
import { startDenoApp } from '../../scripts/smoke-platforms.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import { httpRequests, jobRow, PLATFORM_SECRETS, waitForOutcome } from '../helpers/platforms.js';

// skiplock/deno in the Deno binary from npm: the app (test/fixtures/platforms/deno-app.ts, bundled as
// Deno Deploy and Supabase bundle it) on Deno.serve, reaching Postgres through the local stand-in of
// Neon's HTTP API. The worker route is requested as pg_cron (or Deno.cron's tick) requests it.
let t: TestContext;
useTestSchema('platform-deno', (ctx) => {
  t = ctx;
});

let app: { origin: string; stop(): Promise<void> };

/** The app's variables: neon-http through the local stand-in (or `fetchEndpoint`), nudges on `nudged`. */
const appEnv = (fetchEndpoint: string = inject('neonHttpUrl')) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: 'neon-http',
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_NEON_FETCH_ENDPOINT: fetchEndpoint,
  SKIPLOCK_NUDGE_ROUTES: 'nudged=/skiplock/worker',
  ...PLATFORM_SECRETS,
});

beforeAll(async () => {
  app = await startDenoApp(appEnv());
}, 120_000);

afterAll(async () => {
  await app?.stop();
});

const { post, enqueue } = httpRequests(() => app.origin);

/** A scheduler's tick (pg_cron's request, or Deno.cron's): GET the worker route with CRON_SECRET. */
const tick = () =>
  fetch(`${app.origin}/skiplock/worker`, { headers: { authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}` } });

describe('skiplock/deno in Deno', () => {
  it('a job enqueued through the route waits for the tick; the tick runs it', async () => {
    const id = await enqueue('platform-ping', { n: 4 });
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('queued');
    const response = await tick();
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ claimed: 1 });
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'completed', result: { doubled: 8 } });
  });

  it('the pg_cron request of supabase/skiplock-cron.sql is accepted at once (202); its run completes the job', async () => {
    const id = await enqueue('platform-ping', { n: 7 });
    const sql = readFileSync('templates/supabase/skiplock-cron.sql', 'utf8');
    // The headers the SQL sends: the bearer secret and the start header.
    expect(sql).toContain("'x-skiplock-start', 'nudge'");
    const response = await fetch(`${app.origin}/skiplock/worker`, {
      headers: { authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}`, 'x-skiplock-start': 'nudge' },
    });
    expect(response.status).toBe(202);
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 14 } });
  });

  it('the tick refuses a request without CRON_SECRET', async () => {
    const response = await fetch(`${app.origin}/skiplock/worker`);
    expect(response.status).toBe(401);
  });

  it('a job on a nudged queue runs at once, without a tick', async () => {
    const id = await enqueue('platform-ping', { n: 6 }, 'nudged');
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 12 } });
  });

  it('a dead job is replayed through the replay route and runs again on the next tick', async () => {
    const id = await enqueue('platform-fails', { why: 'no such customer' });
    await tick();
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'dead', attempt: 1 });
    const replay = await post('/skiplock/replay', PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [id] });
    expect(replay.status).toBe(200);
    expect((await jobRow(t.admin, t.schema, id))?.state).toBe('queued');
    // It runs again on the tick, and fails again: dead once more.
    expect(await (await tick()).json()).toMatchObject({ claimed: 1 });
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'dead', attempt: 1 });
  });

  it('a signal through the signal route wakes a waiting job', async () => {
    const id = await enqueue('platform-approval', { order: 'deno-1' });
    await tick();
    const token = createSignalToken(PLATFORM_SECRETS.SKIPLOCK_SIGNAL_SECRET, 'approve:deno-1');
    const signal = await post(`/skiplock/signal?token=${encodeURIComponent(token)}`, undefined, { approved: true });
    expect(signal.status).toBe(200);
    await tick();
    expect(await jobRow(t.admin, t.schema, id)).toMatchObject({ state: 'completed', result: { approved: true } });
  });

  it('the console logs in with the admin token', async () => {
    const login = await fetch(`${app.origin}/admin/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: app.origin },
      body: new URLSearchParams({
        token: PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN,
        name: 'ada',
        next: '/admin/',
      }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const page = await fetch(`${app.origin}/admin/`, { headers: { cookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Error rate per minute'); // the overview, logged in
  });
});

describe('skiplock/deno in Deno, its database endpoint refusing connections', () => {
  let down: { origin: string; stop(): Promise<void> };
  beforeAll(async () => {
    // A port nothing listens on: the endpoint refuses every connection.
    down = await startDenoApp(appEnv(`http://127.0.0.1:${await freePort()}/sql`));
  }, 120_000);
  afterAll(async () => {
    await down?.stop();
  });

  it('an enqueue answers database_unreachable (nothing was done), not outcome_unknown; so does a tick', async () => {
    // Deno's fetch sets no error code: its words (`tcp connect error: Connection refused`) say so.
    const response = await httpRequests(() => down.origin).post(
      '/skiplock/enqueue',
      PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN,
      { kind: 'platform-ping', payload: { n: 1 } },
    );
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({
      error: { code: 'database_unreachable', message: 'the database is unavailable; nothing was done; try again' },
    });
    const tickDown = await fetch(`${down.origin}/skiplock/worker`, {
      headers: { authorization: `Bearer ${PLATFORM_SECRETS.CRON_SECRET}` },
    });
    expect(tickDown.status).toBe(503);
    expect(await tickDown.json()).toMatchObject({ stoppedBecause: 'error', errorCode: 'database_unreachable' });
  });
});

describe('a Deno app with a route of its own (createDenoApp on Deno.serve)', () => {
  let own: { origin: string; stop(): Promise<void> };
  beforeAll(async () => {
    own = await startDenoApp(appEnv(), 'deno-own-routes.ts');
  }, 120_000);
  afterAll(async () => {
    await own?.stop();
  });

  it("its enqueue runs at once through the app's nudge, without a tick", async () => {
    const response = await fetch(`${own.origin}/own/enqueue`, { method: 'POST', body: JSON.stringify({ n: 21 }) });
    expect(response.status).toBe(200);
    const { id } = (await response.json()) as { id: string };
    const row = await waitForOutcome(
      () => jobRow(t.admin, t.schema, id),
      (r) => r?.state === 'completed',
    );
    expect(row).toMatchObject({ state: 'completed', result: { doubled: 42 } });
  });
});
