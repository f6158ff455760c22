// `skiplock init deno` and `init supabase` from the packed package, and the files they write run by
// the Deno binary from npm as written: deno.json's start task (main.ts, Deno Deploy's app) and the
// Supabase Edge Function (supabase/functions/skiplock/, its deno.json and the jobs in _shared/),
// each resolving skiplock from the app's node_modules. Deno Deploy's app reaches Postgres over
// Neon's HTTP API (the local stand-in), the Supabase function over TCP (pg). The test is the
// scheduler: it requests the worker route as Deno.cron's tick or supabase/skiplock-cron.sql's
// pg_cron job does (pg_cron itself is not on this machine's Postgres: docs/deploy-deno.md).
// The Supabase function runs as on Supabase as far as skiplock can tell: with an `EdgeRuntime`
// global (its waitUntil), so serveDeno's CPU guard applies, behind a stand-in of Supabase's gateway
// that serves it at /functions/v1/skiplock and hands it the path without /functions/v1, and with
// SKIPLOCK_BASE_URL as init printed it (https://<project>.supabase.co/functions/v1, here the gateway).
import { readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort } from '../../scripts/local-postgres.js';
import { serveRoute } from '../helpers/console.js';
import {
  EXAMPLE_JOBS,
  type InitApp,
  initApp,
  repo,
  routesOf,
  SECRETS,
  type Served,
  startServer,
} from '../helpers/init-app.js';
import { waitForOutcome } from '../helpers/platforms.js';

let app: InitApp;
let deno: Served;
let supabase: Served;
let gateway: { origin: string; server: Server };

/** Supabase's edge runtime's global, set before the function loads (as Supabase provides it). */
const EDGE_RUNTIME_STAND_IN = `// Supabase's EdgeRuntime global, stood in: keeps a promise running after the response.
(globalThis as { EdgeRuntime?: unknown }).EdgeRuntime = {
  waitUntil(promise: Promise<unknown>) {
    promise.catch(() => {});
  },
};
await import('./supabase/functions/skiplock/index.ts');
`;

/**
 * Supabase's gateway, stood in: `/functions/v1/<function>/…` reaches the function as `/<function>/…`
 * (at `upstream()`); any other path is not a function's.
 */
async function supabaseGateway(upstream: () => string) {
  return serveRoute(async (request) => {
    const url = new URL(request.url);
    if (!url.pathname.startsWith('/functions/v1/')) return Response.json({ msg: 'not found' }, { status: 404 });
    const headers = new Headers(request.headers);
    for (const name of ['host', 'connection', 'content-length']) headers.delete(name);
    const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer();
    const response = await fetch(`${upstream()}${url.pathname.slice('/functions/v1'.length)}${url.search}`, {
      method: request.method,
      headers,
      body,
      redirect: 'manual',
    });
    const answered = new Headers(response.headers);
    for (const name of ['content-encoding', 'content-length', 'transfer-encoding']) answered.delete(name);
    return new Response(await response.arrayBuffer(), { status: response.status, headers: answered });
  });
}

/** What init printed for Supabase's SKIPLOCK_BASE_URL, its <project> the gateway. */
function supabaseBaseUrl(): string {
  const printed = /SKIPLOCK_BASE_URL=(\S+)/.exec(app.printed.supabase ?? '')?.[1];
  if (!printed?.startsWith('https://<project>.supabase.co/')) {
    throw new Error(`init supabase printed no SKIPLOCK_BASE_URL:\n${app.printed.supabase}`);
  }
  return printed.replace('https://<project>.supabase.co', gateway.origin);
}

/** The Deno binary from npm running `args` in the app's folder, serving on a port of its own. */
async function serveDeno(args: string[], env: Record<string, string>): Promise<Served> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  return startServer(join(repo, 'node_modules/.bin/deno'), args, {
    cwd: app.dir,
    origin,
    timeoutMs: 90_000,
    env: {
      // Deno.serve's address without touching the app's code (Deno Deploy and Supabase pick their own).
      DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}`,
      DENO_NO_UPDATE_CHECK: '1',
      ...app.variables(origin),
      ...env,
    },
  });
}

/** deno.json's start task, as `deno task start` runs it. */
function startTask(): string[] {
  const { tasks } = JSON.parse(readFileSync(join(app.dir, 'deno.json'), 'utf8')) as { tasks: { start: string } };
  return tasks.start.split(' ').slice(1);
}

beforeAll(async () => {
  app = await initApp('init-deno', ['deno', 'supabase']);
  // Without --unstable-cron: no Deno.cron, so no tick of its own races the test's (the template's
  // crons are `Deno.cron?.(…)` and serveDeno's default, both off without it).
  const args = startTask().filter((arg) => arg !== '--unstable-cron');
  [deno, supabase] = await Promise.all([
    serveDeno(args, {
      SKIPLOCK_DRIVER: 'neon-http',
      SKIPLOCK_NEON_FETCH_ENDPOINT: inject('neonHttpUrl'),
      SKIPLOCK_NUDGE_ROUTES: 'reports=/skiplock/worker',
    }),
    // The function as Supabase's edge runtime serves it: run with the permissions an Edge Function
    // has, its EdgeRuntime global set first, behind the gateway.
    (async () => {
      writeFileSync(join(app.dir, 'edge-runtime.ts'), EDGE_RUNTIME_STAND_IN);
      gateway = await supabaseGateway(() => supabase.origin);
      return serveDeno(['run', '--allow-net', '--allow-env', 'edge-runtime.ts'], {
        SKIPLOCK_DRIVER: 'pg',
        SKIPLOCK_BASE_URL: supabaseBaseUrl(),
        SKIPLOCK_NUDGE_ROUTES: 'reports=/skiplock/skiplock/worker',
      });
    })(),
  ]);
}, 300_000);

afterAll(async () => {
  await deno?.stop();
  await supabase?.stop();
  gateway?.server.close();
  await app?.remove();
});

const row = (id: string) => app.row(id);
const settled = (id: string) =>
  waitForOutcome(
    () => row(id),
    (r) => r?.state === 'completed' || r?.state === 'dead',
  );

describe('skiplock init deno: main.ts in Deno, started as deno.json’s start task', () => {
  it('init printed the task; a job enqueued through the route waits for the tick, and the tick runs it', async () => {
    expect(app.printed.deno).toContain('deno task start');
    expect(startTask()).toEqual(['run', '--allow-net', '--allow-env', '--unstable-cron', 'main.ts']);
    const routes = routesOf(deno.origin);
    const id = await routes.enqueue(EXAMPLE_JOBS.completes);
    expect((await row(id))?.state).toBe('queued');
    const tick = await routes.cron('/skiplock/worker');
    expect(tick.status).toBe(200);
    expect(await tick.json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await row(id)).toMatchObject({ kind: 'send-email', state: 'completed' });
  });

  it('a job on a nudged queue runs at once, without a tick', async () => {
    const id = await routesOf(deno.origin).enqueue(EXAMPLE_JOBS.report);
    expect(await settled(id)).toMatchObject({ kind: 'build-report', state: 'completed' });
  });

  it('a dead job is replayed through the replay route and runs again on the next tick', async () => {
    const routes = routesOf(deno.origin);
    const id = await routes.enqueue(EXAMPLE_JOBS.dies);
    await routes.cron('/skiplock/worker');
    expect(await row(id)).toMatchObject({ state: 'dead', attempt: 1 });
    expect((await routes.replay([id])).status).toBe(200);
    expect((await row(id))?.state).toBe('queued');
    expect(await (await routes.cron('/skiplock/worker')).json()).toMatchObject({ claimed: 1, dead: 1 });
    expect((await row(id))?.state).toBe('dead');
  });

  it('maintenance answers its cron request; the console logs in with the admin token', async () => {
    const routes = routesOf(deno.origin);
    expect((await routes.cron('/skiplock/maintenance')).status).toBe(200);
    const admin = await routes.console();
    expect(admin).toMatchObject({ login: 303, overview: 200 });
    expect(admin.page).toContain('Error rate per minute');
  });
});

describe('skiplock init supabase: the Edge Function in Deno, requested as supabase/skiplock-cron.sql does', () => {
  const sql = () => readFileSync(join(app.dir, 'supabase/skiplock-cron.sql'), 'utf8');
  /** A URL the SQL requests, <project> the gateway. */
  const urlOf = (route: string) => {
    const url = new RegExp(`url := 'https://<project>\\.supabase\\.co(/functions/v1/skiplock/skiplock/${route})'`).exec(
      sql(),
    );
    if (!url?.[1]) throw new Error(`supabase/skiplock-cron.sql requests no ${route} route`);
    return `${gateway.origin}${url[1]}`;
  };
  /** The function's routes through the gateway, as a client of the project reaches them. */
  const routes = () => routesOf(supabaseBaseUrl(), '/skiplock');
  /** The worker's pg_cron request: the bearer CRON_SECRET and the start header the SQL sends. */
  const pgCronTick = () => {
    expect(sql()).toContain("'x-skiplock-start', 'nudge'");
    return fetch(urlOf('worker'), {
      headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}`, 'x-skiplock-start': 'nudge' },
    });
  };

  it('init printed the deploy; the pg_cron request is accepted at once (202) and its run completes the job', async () => {
    expect(app.printed.supabase).toContain('supabase functions deploy skiplock --no-verify-jwt');
    const id = await routes().enqueue(EXAMPLE_JOBS.completes);
    expect((await row(id))?.state).toBe('queued');
    expect((await pgCronTick()).status).toBe(202);
    expect(await settled(id)).toMatchObject({ kind: 'send-email', state: 'completed' });
  });

  it('a job on a nudged queue runs at once: the nudge reaches the worker route below SKIPLOCK_BASE_URL', async () => {
    const id = await routes().enqueue(EXAMPLE_JOBS.report);
    expect(await settled(id)).toMatchObject({ kind: 'build-report', state: 'completed' });
  });

  it('a dead job is replayed through the replay route and runs again on the next pg_cron request', async () => {
    const id = await routes().enqueue(EXAMPLE_JOBS.dies);
    await pgCronTick();
    expect(await settled(id)).toMatchObject({ state: 'dead', attempt: 1 });
    expect((await routes().replay([id])).status).toBe(200);
    expect((await row(id))?.state).toBe('queued');
    await pgCronTick();
    expect(
      await waitForOutcome(
        () => row(id),
        (r) => r?.state === 'dead',
      ),
    ).toMatchObject({ state: 'dead' });
  });

  it('maintenance answers the request of its pg_cron job; the console logs in at /skiplock/admin', async () => {
    const maintenance = await fetch(urlOf('maintenance'), {
      headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
    });
    expect(maintenance.status).toBe(200);
    // Logged in at the function's own origin (what Host the gateway passes on is Supabase's to say);
    // the pages' links carry /functions/v1, and one followed through the gateway opens.
    const admin = await routesOf(supabase.origin, '/skiplock').console();
    expect(admin).toMatchObject({ login: 303, overview: 200 });
    expect(admin.page).toContain('Error rate per minute');
    const link = /href="(\/functions\/v1\/skiplock\/admin\/dlq)"/.exec(admin.page)?.[1];
    expect(link).toBe('/functions/v1/skiplock/admin/dlq');
    const dlq = await fetch(`${gateway.origin}${link}`, { headers: { cookie: admin.cookie } });
    expect(dlq.status).toBe(200);
  });
});
