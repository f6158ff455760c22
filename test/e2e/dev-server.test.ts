import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, expect, inject, it, onTestFinished } from 'vitest';
import { freePort } from '../../scripts/local-postgres.js';
import { startStuckTarget } from '../helpers/stuck-target.js';

const schema = `dev_${randomBytes(4).toString('hex')}`;
const secrets = {
  CRON_SECRET: 'dev-cron-secret-0123456789',
  SKIPLOCK_ENQUEUE_TOKEN: 'dev-enqueue-token-0123456789',
  SKIPLOCK_ADMIN_TOKEN: 'dev-admin-token-0123456789',
};
let child: ChildProcess | undefined;

afterAll(async () => {
  child?.kill('SIGTERM');
  const client = new pg.Client({ connectionString: inject('databaseUrl') });
  await client.connect();
  await client.query(`drop schema if exists "${schema}" cascade`);
  await client.end();
});

it('npm run dev serves the routes on localhost and runs the crons; a stuck nudge target never holds an enqueue', async () => {
  const port = await freePort();
  // The nudge's worker route: accepts connections, never answers (a stuck or cold target).
  const stuck = await startStuckTarget();
  onTestFinished(() => stuck.close());
  const stuckUrl = `http://127.0.0.1:${stuck.port}/api/worker`;
  // --crons-once: a scheduled run at a minute boundary would otherwise claim the job below first.
  child = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev.ts', '--crons-once'], {
    env: {
      ...process.env,
      DATABASE_URL: inject('databaseUrl'),
      SKIPLOCK_SCHEMA: schema,
      PORT: String(port),
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_NUDGE_ROUTES: `*=${stuckUrl}`,
      ...secrets,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dev server did not start:\n${output}`)), 30_000);
    const check = setInterval(() => {
      if (output.includes('cron /api/maintenance')) {
        clearInterval(check);
        clearTimeout(timer);
        resolve();
      }
    }, 50);
  });
  expect(output).toContain(`listening on http://127.0.0.1:${port}`);
  expect(output).toMatch(/cron \/api\/worker → 200 \{"invocationId"/);
  expect(output).toContain('(--crons-once: not again)');
  const base = `http://127.0.0.1:${port}`;
  const enqueued = await fetch(`${base}/api/enqueue`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secrets.SKIPLOCK_ENQUEUE_TOKEN}` },
    body: JSON.stringify({ kind: 'build-report', payload: { reportId: 'r1', sections: 2 } }),
  });
  expect(enqueued.status).toBe(200);
  // The nudge did go out, and its request still waits at the stuck target: the enqueue answered
  // without waiting for its worker route (which never answers) or for the start's 10 s timeout.
  expect(await stuck.firstAccepted()).toBe(1);
  expect(stuck.open()).toBe(1);
  const worker = await fetch(`${base}/api/reports-worker`, {
    headers: { authorization: `Bearer ${secrets.CRON_SECRET}` },
  });
  expect(await worker.json()).toMatchObject({ claimed: 1, completed: 1 });
  expect((await fetch(`${base}/api/worker`)).status).toBe(401);
  expect((await fetch(`${base}/nope`)).status).toBe(404);

  // The console at /admin, through vercel.json's rewrites to api/admin.ts.
  expect(output).toContain(`console: ${base}/admin`);
  const visit = await fetch(`${base}/admin`, { redirect: 'manual' });
  expect(visit.status).toBe(303);
  expect(visit.headers.get('location')).toBe('/admin/login?next=%2Fadmin');
  const login = await fetch(`${base}/admin/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
    body: new URLSearchParams({ token: secrets.SKIPLOCK_ADMIN_TOKEN, name: 'dev' }).toString(),
  });
  expect(login.status).toBe(303);
  const cookie = (login.headers.getSetCookie()[0] ?? '').split(';')[0] as string;
  const overview = await fetch(`${base}/admin/`, { headers: { cookie } });
  expect(overview.status).toBe(200);
  const page = await overview.text();
  expect(page).toContain('<h1>Overview');
  expect(page).toContain('build-report');
});

it('npm run dev -- --help prints its options and exits, starting nothing', async () => {
  const run = spawn(process.execPath, ['--import', 'tsx', 'scripts/dev.ts', '--help'], {
    env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:9/none' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  run.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => run.on('exit', resolve));
  expect(code).toBe(0);
  expect(output).toContain('--crons-once');
  expect(output).toContain('the pg\n                       driver only');
  expect(output).not.toContain('listening on');
});
