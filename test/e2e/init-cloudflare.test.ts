// `skiplock init cloudflare` from the packed package, and the Worker it writes, bundled by wrangler
// as its next steps say (`wrangler deploy --dry-run`: what `wrangler deploy` uploads) and run in
// workerd through Miniflare (both from npm) with what the written wrangler.jsonc configures: its
// name, compatibility date and flags, vars, the SKIPLOCK_SELF service binding and the two Cron
// Triggers. Postgres is reached over Neon's HTTP API (the local stand-in), as the Worker does.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { unstable_readConfig } from 'wrangler';
import { EXAMPLE_JOBS, type InitApp, initApp, repo, SECRETS } from '../helpers/init-app.js';
import { waitForOutcome } from '../helpers/platforms.js';

const run = promisify(execFile);
/** Workers' limit on a Worker's size after compression on the Free plan (10 MiB on Paid). */
const FREE_PLAN_GZIP_LIMIT = 3 * 1024 * 1024;

let app: InitApp;
let bundle: string;
let mf: Miniflare;
let config: ReturnType<typeof unstable_readConfig>;

beforeAll(async () => {
  app = await initApp('init-cloudflare', ['cloudflare']);
  // `npm install -D wrangler`, as the next steps say: this repository's wrangler, linked.
  symlinkSync(join(repo, 'node_modules/wrangler'), join(app.dir, 'node_modules/wrangler'));
  const dryRun = /npx wrangler (deploy --dry-run --outdir (\S+))/.exec(app.printed.cloudflare ?? '');
  if (!dryRun?.[1] || !dryRun[2]) throw new Error(`init printed no wrangler dry run:\n${app.printed.cloudflare}`);
  await run(process.execPath, [join(app.dir, 'node_modules/wrangler/bin/wrangler.js'), ...dryRun[1].split(' ')], {
    cwd: app.dir,
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true' },
    timeout: 120_000,
  });
  const outdir = join(app.dir, dryRun[2]);
  const file = readdirSync(outdir).find((name) => name.endsWith('.js'));
  if (!file) throw new Error(`wrangler wrote no bundle to ${outdir}`);
  bundle = readFileSync(join(outdir, file), 'utf8');
  config = unstable_readConfig({ config: join(app.dir, 'wrangler.jsonc') });
  mf = new Miniflare({
    name: config.name,
    modules: true,
    script: bundle,
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags,
    bindings: {
      ...(config.vars as Record<string, string>),
      // The secrets `wrangler secret put` sets, and the local database behind the Neon stand-in.
      DATABASE_URL: app.databaseUrl,
      ...SECRETS,
      SKIPLOCK_SCHEMA: app.schema,
      SKIPLOCK_NEON_FETCH_ENDPOINT: inject('neonHttpUrl'),
      SKIPLOCK_LOG_LEVEL: 'error',
    },
    serviceBindings: Object.fromEntries(
      (config.services ?? []).map((service: { binding: string; service: string }) => [
        service.binding,
        service.service,
      ]),
    ),
  });
  await mf.ready;
}, 300_000);

afterAll(async () => {
  await mf?.dispose();
  await app?.remove();
});

const row = (id: string) => app.row(id);
const crons = () => config.triggers.crons ?? [];
/** The Worker's `scheduled` entry, as a Cron Trigger calls it. */
const trigger = async (cron: string) =>
  ((await mf.getWorker()) as unknown as { scheduled(o: { cron: string }): Promise<{ outcome: string }> }).scheduled({
    cron,
  });
const post = (path: string, token: string, body: unknown) =>
  mf.dispatchFetch(`http://localhost${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
const enqueue = async (job: { kind: string; payload: unknown }) => {
  const response = await post('/skiplock/enqueue', SECRETS.SKIPLOCK_ENQUEUE_TOKEN, job);
  expect(response.status).toBe(200);
  return ((await response.json()) as { results: { id: string }[] }).results[0]?.id as string;
};
const settled = (id: string, state: string) =>
  waitForOutcome(
    () => row(id),
    (r) => r?.state === state,
  );

describe('skiplock init cloudflare: the Worker wrangler bundles, in workerd', () => {
  it("wrangler bundles it from the app's node_modules, within the Free plan's compressed size", () => {
    expect(gzipSync(bundle).length).toBeLessThan(FREE_PLAN_GZIP_LIMIT);
    // The written config's triggers: the worker each minute, maintenance on src/skiplock.ts's maintenanceCron.
    expect(crons()).toEqual(['* * * * *', '*/5 * * * *']);
    expect(readFileSync(join(app.dir, 'src/skiplock.ts'), 'utf8')).toContain(`maintenanceCron: '${crons()[1]}'`);
  });

  it('an enqueue through the route nudges the worker through the SKIPLOCK_SELF service binding: the job runs at once', async () => {
    const id = await enqueue(EXAMPLE_JOBS.report);
    expect(await settled(id, 'completed')).toMatchObject({ kind: 'build-report', state: 'completed' });
  });

  it("a job nothing nudged waits for the minute's Cron Trigger, which runs it", async () => {
    const id = await app.enqueueDirect();
    expect((await row(id))?.state).toBe('queued');
    await expect(trigger(crons()[0] as string)).resolves.toMatchObject({ outcome: 'ok' });
    expect(await row(id)).toMatchObject({ kind: 'send-email', state: 'completed' });
  });

  it('a dead job is replayed through the replay route, and runs again at once (nudged)', async () => {
    const id = await enqueue(EXAMPLE_JOBS.dies);
    expect(await settled(id, 'dead')).toMatchObject({ state: 'dead', attempt: 1 });
    const replay = await post('/skiplock/replay', SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [id] });
    expect(replay.status).toBe(200);
    expect(((await replay.json()) as { replayed: { id: string }[] }).replayed.map((j) => j.id)).toEqual([id]);
    // It ran again and failed again (no WEBHOOK_SIGNING_SECRET): dead once more, after being queued.
    expect(await settled(id, 'dead')).toMatchObject({ state: 'dead' });
  });

  it('the maintenance Cron Trigger runs maintenance, not the worker; the console logs in', async () => {
    const id = await app.enqueueDirect();
    await expect(trigger(crons()[1] as string)).resolves.toMatchObject({ outcome: 'ok' });
    expect((await row(id))?.state).toBe('queued');
    await trigger(crons()[0] as string);
    expect((await row(id))?.state).toBe('completed');
    const login = await mf.dispatchFetch('http://localhost/admin/login', {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: SECRETS.SKIPLOCK_ADMIN_TOKEN, name: 'ada', next: '/admin/' }).toString(),
    });
    expect(login.status).toBe(303);
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const page = await mf.dispatchFetch('http://localhost/admin/', { headers: { cookie } });
    expect(await page.text()).toContain('Error rate per minute');
  });
});
