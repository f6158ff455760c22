// `skiplock init netlify` from the packed package, and its four functions run by Netlify's own local
// tooling from npm: @netlify/dev, what `netlify dev` runs (test/fixtures/netlify-tools/serve.mjs),
// builds each function with zip-it-and-ship-it and invokes it as Netlify does — a v2 function in
// a worker thread, the routes function on its `config.path`, a scheduled function's URL as the
// scheduler's POST, the background function answered 202. The variables are those the next steps
// name; the database is the local Postgres over TCP (pg), as a Netlify Function reaches it.
// The tools are installed apart, with their own TypeScript 5 (test/helpers/netlify-tools.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/local-postgres.js';
import { EXAMPLE_JOBS, type InitApp, initApp, routesOf, type Served, startServer } from '../helpers/init-app.js';
import { netlifyTools } from '../helpers/netlify-tools.js';
import { waitForOutcome } from '../helpers/platforms.js';

let app: InitApp;
let netlify: Served;

/** A function's own URL: how Netlify's local tooling invokes a scheduled function by hand. */
const invoke = (name: string) => fetch(`${netlify.origin}/.netlify/functions/${name}`, { method: 'POST' });

beforeAll(async () => {
  const [tools, made] = await Promise.all([netlifyTools(), initApp('init-netlify', ['netlify'])]);
  app = made;
  // SKIPLOCK_NUDGE_ROUTES as the next steps print it.
  const nudgeRoutes = /SKIPLOCK_NUDGE_ROUTES='([^']+)'/.exec(app.printed.netlify ?? '')?.[1];
  if (!nudgeRoutes) throw new Error(`init printed no SKIPLOCK_NUDGE_ROUTES:\n${app.printed.netlify}`);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  netlify = await startServer(process.execPath, [`${tools}/serve.mjs`, app.dir, String(port)], {
    cwd: app.dir,
    origin,
    timeoutMs: 120_000,
    env: { ...app.variables(origin), SKIPLOCK_DRIVER: 'pg', SKIPLOCK_NUDGE_ROUTES: nudgeRoutes },
  });
  // The tooling builds a function on its first request: build all four now, each answering as
  // Netlify would (nothing is queued yet; the background function's 401 is inside its 202).
  const built = await Promise.all([
    fetch(`${origin}/skiplock/no-such-route`),
    invoke('skiplock-worker'),
    invoke('skiplock-maintenance'),
    fetch(`${origin}/.netlify/functions/skiplock-worker-background`),
  ]);
  expect(built.map((response) => response.status)).toEqual([404, 200, 200, 202]);
}, 600_000);

afterAll(async () => {
  await netlify?.stop();
  await app?.remove();
});

const row = (id: string) => app.row(id);
/** A nudged run goes through the tooling's background emulation: a worker thread started per request. */
const settled = (id: string, state: string) =>
  waitForOutcome(
    () => row(id),
    (r) => r?.state === state,
    60_000,
  );

describe("skiplock init netlify: the functions, built and invoked by Netlify's local tooling", () => {
  it('init printed the deploy; the scheduled function runs a job nothing nudged', async () => {
    expect(app.printed.netlify).toContain('npx netlify deploy --build --prod');
    const id = await app.enqueueDirect();
    expect((await row(id))?.state).toBe('queued');
    const tick = await invoke('skiplock-worker');
    expect(tick.status).toBe(200);
    expect(await tick.json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await row(id)).toMatchObject({ kind: 'send-email', state: 'completed' });
  });

  it('an enqueue through the routes function nudges the background function, which runs the job', async () => {
    const id = await routesOf(netlify.origin).enqueue(EXAMPLE_JOBS.report);
    expect(await settled(id, 'completed')).toMatchObject({ kind: 'build-report', state: 'completed' });
  });

  it('a dead job is replayed through the routes function, and runs again in the background function', async () => {
    const routes = routesOf(netlify.origin);
    const id = await routes.enqueue(EXAMPLE_JOBS.dies);
    expect(await settled(id, 'dead')).toMatchObject({ state: 'dead', attempt: 1 });
    const replay = await routes.replay([id]);
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { replayed: { id: string }[] }).replayed.map((j) => j.id)).toEqual([id]);
    expect(await settled(id, 'dead')).toMatchObject({ state: 'dead' });
  });

  it('the maintenance function runs maintenance; the console logs in at /admin with the admin token', async () => {
    const maintenance = await invoke('skiplock-maintenance');
    expect(maintenance.status).toBe(200);
    expect(await maintenance.json()).toMatchObject({ pruneFinished: true });
    const admin = await routesOf(netlify.origin).console();
    expect(admin).toMatchObject({ login: 303, overview: 200 });
    expect(admin.page).toContain('Error rate per minute');
  });
});
