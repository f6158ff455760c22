// A Next.js app as a user makes one and ships it: skiplock vendored into the app by `npm run vendor`
// and installed beside the real `next`, `skiplock init vercel` (which sees the Next.js app), the
// app committed with git and cloned elsewhere as a deploy does, the original deleted; in the clone,
// `npm ci`, `next build` under webpack and Turbopack with `@vercel/functions` installed as init's
// next steps say (the routes import it) and no other optional peer of skiplock, then `next start`
// serving a nudged job, a cron's worker run and the console, and idle ticks on a Runtime Cache.
// Offline: every package comes from the npm cache `npm ci` filled.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { installCommands } from '../../cli/init.js';
import { npm, packedTarball } from '../helpers/packed.js';
import { startRuntimeCacheEndpoint } from '../helpers/runtime-cache-endpoint.js';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');
// The developer's machine: the app as made, vendored, installed and committed.
const origin = join(mkdtempSync(join(tmpdir(), 'skiplock-next-')), 'my-next-app');
// The deploy's machine: a clone in another temporary folder, one level deeper, where no path
// written on the developer's machine (../skiplock/…, ../../skiplock-next-…) leads anywhere.
const deployRoot = mkdtempSync(join(tmpdir(), 'skiplock-deploy-'));
const app = join(deployRoot, 'build', 'my-next-app');
const schema = `next_${process.pid}`;
const secrets = {
  CRON_SECRET: 'cron-secret-for-the-next-test',
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-for-the-next-test',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-for-the-next-test',
};
const versionOf = (name: string) =>
  (JSON.parse(readFileSync(join(repo, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
const next = (args: string[]) =>
  run(process.execPath, [join(app, 'node_modules/next/dist/bin/next'), ...args], {
    cwd: app,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' },
    timeout: 240_000,
  });
const git = (args: string[], cwd: string) =>
  run('git', ['-c', 'user.name=ci', '-c', 'user.email=ci@example.com', '-c', 'commit.gpgsign=false', ...args], { cwd });
let packed: Buffer;
let vendorOutput: string;
let installed: string[];
let initOutput: string;
let nextStepInstall: string[];
let server: ChildProcess | undefined;
let serverLog = '';

beforeAll(async () => {
  // The run's one pack (shared by every file that installs the package) is done before the vendor
  // script packs again, so the two builds never share dist/.
  packed = readFileSync(await packedTarball());
  // A Next.js app that already has a vercel.json of its own.
  mkdirSync(origin);
  writeFileSync(join(origin, 'package.json'), JSON.stringify({ name: 'my-next-app', private: true }));
  writeFileSync(join(origin, '.gitignore'), 'node_modules/\n.next/\n');
  writeFileSync(
    join(origin, 'vercel.json'),
    JSON.stringify({ regions: ['fra1'], crons: [{ path: '/api/digest', schedule: '0 8 * * *' }] }),
  );
  // From the clone of skiplock, by a path relative to it, as the README shows.
  ({ stdout: vendorOutput } = await run('npm', ['run', '-s', 'vendor', '--', relative(repo, origin)], { cwd: repo }));
  installed = /^ {2}npm install (.+)$/m.exec(vendorOutput)?.[1]?.split(' ') ?? [];
  if (!installed[0]) throw new Error(`npm run vendor printed no npm install:\n${vendorOutput}`);
  // The printed install, its peers (and Next.js's own) pinned to this repository's versions: offline.
  const deps = ['next', 'react', 'react-dom', 'zod', 'drizzle-orm', 'typescript', '@types/react', '@types/node'];
  await npm(['install', installed[0], ...deps.map((name) => `${name}@${versionOf(name)}`)], origin);
  ({ stdout: initOutput } = await run(join(origin, 'node_modules/.bin/skiplock'), ['init', 'vercel', '--plan', 'pro'], {
    cwd: origin,
  }));
  // The next steps' own install (the package the routes import), pinned to this repository's version.
  nextStepInstall = /^ +npm install (@vercel\/functions)\b/m.exec(initOutput)?.slice(1) ?? [];
  if (!nextStepInstall[0]) throw new Error(`init printed no npm install @vercel/functions:\n${initOutput}`);
  await npm(['install', ...nextStepInstall.map((name) => `${name}@${versionOf(name)}`)], origin);
  await git(['init', '-q'], origin);
  await git(['add', '-A'], origin);
  await git(['commit', '-qm', 'my next app'], origin);
  mkdirSync(dirname(app));
  await git(['clone', '-q', origin, app], deployRoot);
  rmSync(dirname(origin), { recursive: true, force: true }); // nothing in the clone may lean on it
  await npm(['ci'], app);
}, 300_000);

afterAll(async () => {
  server?.kill('SIGKILL');
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
  rmSync(dirname(origin), { recursive: true, force: true });
  rmSync(deployRoot, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
  const { port } = probe.address() as { port: number };
  await new Promise((done) => probe.close(done));
  return port;
}

/**
 * How Next's output for an app route (`.next/server/app/<route>/route.js` and the files its
 * `.nft.json` lists, which a deploy carries into the function) holds the Runtime Cache client of
 * `@vercel/functions`: as files of the package in node_modules, as code in one of the route's
 * chunks (a bundler inlined it), or not at all.
 */
function runtimeCacheIn(route: string): 'traced' | 'bundled' | 'missing' {
  const dir = join(app, '.next/server/app', route);
  const { files } = JSON.parse(readFileSync(join(dir, 'route.js.nft.json'), 'utf8')) as { files: string[] };
  const paths = [join(dir, 'route.js'), ...files.map((file) => resolve(dir, file))];
  if (paths.some((path) => path.includes('/node_modules/@vercel/functions/cache/'))) return 'traced';
  const chunks = paths.filter((path) => path.startsWith(join(app, '.next')) && path.endsWith('.js'));
  // A header name only the Runtime Cache client sends.
  const bundled = chunks.some((path) => readFileSync(path, 'utf8').includes('x-vercel-cache-item-name'));
  return bundled ? 'bundled' : 'missing';
}

/**
 * `next start` of the built app on a free port, with the database, the secrets and `env` (and no
 * other variable of this process: no VERCEL=1); resolves with the port once the routes answer.
 */
async function startNext(env: Record<string, string>): Promise<number> {
  server?.kill('SIGKILL');
  serverLog = '';
  const port = await freePort();
  server = spawn(process.execPath, [join(app, 'node_modules/next/dist/bin/next'), 'start', '-p', String(port)], {
    cwd: app,
    env: {
      PATH: process.env.PATH,
      NEXT_TELEMETRY_DISABLED: '1',
      DATABASE_URL: inject('databaseUrl'),
      SKIPLOCK_SCHEMA: schema,
      ...secrets,
      ...env,
    },
  });
  server.stdout?.on('data', (chunk) => {
    serverLog += chunk;
  });
  server.stderr?.on('data', (chunk) => {
    serverLog += chunk;
  });
  await until(
    () =>
      fetch(`http://localhost:${port}/api/worker`).then(
        (r) => r.status === 401,
        () => false,
      ),
    60_000,
    'next start',
  );
  return port;
}

/** Polls `check` until it holds (a condition, not a length of time), at most `ms`. */
async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms; server log:\n${serverLog}`);
    await delay(100);
  }
}

describe('a Next.js app that ships skiplock in vendor/', () => {
  it("`npm run vendor` prints the README's install; the clone holds the tarball, and names it by a path inside itself", async () => {
    const { version } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string };
    const tarball = `vendor/skiplock-${version}.tgz`;
    expect(installed).toEqual([`./${tarball}`, 'zod', 'drizzle-orm']);
    expect(installCommands().join('\n')).toContain(`npm install ${installed.join(' ')}`);
    expect(vendorOutput).toMatch(/git add vendor package\.json package-lock\.json/);
    expect(vendorOutput).not.toMatch(/warning/);
    const { stdout: tracked } = await git(['ls-files'], app);
    expect(tracked.split('\n')).toEqual(expect.arrayContaining([tarball, 'package.json', 'package-lock.json']));
    expect(tracked).not.toMatch(/node_modules|\.next/);
    // The vendored bytes are what `npm pack` makes, and what the lockfile's integrity names: npm ci
    // here alone would not notice a missing or stale vendor/ file, since npm's cache serves a tarball
    // by its integrity without reading it — a machine without that cache entry (Vercel) would.
    const bytes = readFileSync(join(app, tarball));
    expect(bytes.equals(packed)).toBe(true);
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8'));
    expect(pkg.dependencies.skiplock).toBe(`file:${tarball}`);
    expect(lock.packages['node_modules/skiplock']).toMatchObject({
      version,
      resolved: `file:${tarball}`,
      integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
    });
    expect(JSON.parse(readFileSync(join(app, 'node_modules/skiplock/package.json'), 'utf8')).version).toBe(version);
    // No path in either file leaves the app.
    for (const file of ['package.json', 'package-lock.json']) {
      const text = readFileSync(join(app, file), 'utf8');
      const local = [...text.matchAll(/"(?:file|link):([^"]*)"/g)].map((m) => m[1]);
      expect(local, file).toEqual(local.filter((path) => !path!.startsWith('/') && !path!.split('/').includes('..')));
      for (const outside of [repo, dirname(origin), deployRoot]) expect(text, file).not.toContain(outside);
    }
  });
});

describe('a Next.js app from `skiplock init vercel`', () => {
  it('writes App Router route handlers and adds its crons to the existing vercel.json', () => {
    expect(initOutput).toMatch(/this is a Next\.js app/);
    expect(existsSync(join(app, 'functions/idle-hints.ts'))).toBe(true);
    expect(JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).dependencies).toHaveProperty(
      '@vercel/functions',
    );
    for (const route of ['worker', 'reports-worker', 'enqueue', 'replay', 'control', 'signal', 'maintenance']) {
      expect(existsSync(join(app, `app/api/${route}/route.ts`))).toBe(true);
    }
    expect(existsSync(join(app, 'app/admin/[[...path]]/route.ts'))).toBe(true);
    expect(existsSync(join(app, 'api'))).toBe(false); // a Next.js app ignores a root api/ folder
    const config = JSON.parse(readFileSync(join(app, 'vercel.json'), 'utf8'));
    expect(config.regions).toEqual(['fra1']);
    expect(config.crons.map((c: { path: string }) => c.path)).toEqual([
      '/api/digest',
      '/api/worker',
      '/api/reports-worker',
      '/api/maintenance',
    ]);
  });

  it("`next build` passes under webpack and Turbopack, the default config, skiplock's AWS SDK peers not installed", async () => {
    // The routes import @vercel/functions (init's next steps install it); skiplock's own optional
    // imports — the AWS SDK — need no install and no next.config entry.
    expect(existsSync(join(app, 'node_modules/@vercel/functions'))).toBe(true);
    for (const peer of ['@aws-sdk/client-lambda', '@aws-sdk/client-secrets-manager']) {
      expect(existsSync(join(app, 'node_modules', peer))).toBe(false);
    }
    // A route of the app's own that loads skiplock/vercel without functions/idle-hints.ts: the control.
    mkdirSync(join(app, 'app/api/plain'), { recursive: true });
    writeFileSync(
      join(app, 'app/api/plain/route.ts'),
      "import { createVercelControl } from 'skiplock/vercel';\nexport const POST = createVercelControl({ idleHints: false });\n",
    );
    const webpack = await next(['build', '--webpack']);
    expect(webpack.stdout).toMatch(/ƒ \/api\/worker/);
    const carried = () => ({
      worker: runtimeCacheIn('api/worker'),
      admin: runtimeCacheIn('admin/[[...path]]'),
      plain: runtimeCacheIn('api/plain'),
    });
    const webpackCarries = carried();
    const turbopack = await next(['build']);
    expect(turbopack.stdout).toMatch(/Next\.js [\d.]+ \(Turbopack\)/);
    for (const route of [
      '/admin/[[...path]]',
      '/api/enqueue',
      '/api/worker',
      '/api/reports-worker',
      '/api/maintenance',
    ]) {
      expect(turbopack.stdout).toContain(`ƒ ${route}`);
    }
    // What a deploy carries into each function: the worker and console routes, which import
    // @vercel/functions (functions/idle-hints.ts), hold its Runtime Cache client; a route that loads
    // the same skiplock/vercel but not that module does not — skiplock's own import('@vercel/functions'),
    // made at run time, is followed by neither bundler nor by Next's tracing. (Next 16 inlines the
    // package into the importing routes' chunks under both bundlers: 'bundled'.)
    const turbopackCarries = carried();
    for (const carries of [webpackCarries, turbopackCarries]) {
      expect(carries.worker).not.toBe('missing');
      expect(carries.admin).not.toBe('missing');
      expect(carries.plain).toBe('missing');
    }
  }, 300_000);

  it("an api/ route (the `init vercel` template outside Next.js) needs no import: @vercel/nft follows skiplock's own import('@vercel/functions')", async () => {
    // @vercel/nft traces the api/ functions Vercel's Node.js builder deploys; Next.js ships a copy.
    const nft = createRequire(join(app, 'package.json'))('next/dist/compiled/@vercel/nft') as {
      nodeFileTrace(files: string[], options: { base: string }): Promise<{ fileList: Iterable<string> }>;
    };
    const { fileList } = await nft.nodeFileTrace([join(app, 'node_modules/skiplock/dist/adapters/vercel.js')], {
      base: app,
    });
    expect([...fileList]).toContain('node_modules/@vercel/functions/cache/index.js');
  });

  it('`next start`: an enqueue nudges the worker route through after(), a cron request runs the worker, the console logs in on localhost and 127.0.0.1', async () => {
    const url = inject('databaseUrl');
    await run(join(app, 'node_modules/.bin/skiplock'), ['migrate', '--schema', schema], {
      cwd: app,
      env: { ...process.env, DATABASE_URL: url, SKIPLOCK_SCHEMA: schema },
    });
    // Only the e-mails' queue is nudged: the reports' job waits for its cron. No VERCEL=1.
    const port = await startNext({ SKIPLOCK_NUDGE_ROUTES: 'emails=/api/worker' });
    const origin = `http://localhost:${port}`;

    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const states = async () =>
        Object.fromEntries(
          (await db.query<{ kind: string; state: string }>(`select kind, state from ${schema}.jobs`)).rows.map((r) => [
            r.kind,
            r.state,
          ]),
        );
      const enqueue = (body: unknown) =>
        fetch(`${origin}/api/enqueue`, {
          method: 'POST',
          headers: { authorization: `Bearer ${secrets.SKIPLOCK_ENQUEUE_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const email = { to: 'a@example.com', subject: 's', template: 'welcome', idempotencyKey: 'next-1' };
      const sent = await enqueue({ kind: 'send-email', payload: email });
      expect(sent.status).toBe(200);
      expect(await sent.json()).toMatchObject({ results: [{ outcome: 'inserted' }] });
      // No cron runs here: only the nudge, its request kept alive by after(), can complete it.
      await until(async () => (await states())['send-email'] === 'completed', 30_000, 'the nudged job');
      // A burst: the nudger sends one start at once and one more when its window ends, after these
      // responses were sent — that start's request is handed to after() from the window's timer.
      for (const n of [2, 3, 4]) {
        const more = await enqueue({ kind: 'send-email', payload: { ...email, idempotencyKey: `next-${n}` } });
        expect(more.status).toBe(200);
      }
      const emailsDone = async () =>
        (
          await db.query<{ n: number }>(
            `select count(*)::int as n from ${schema}.jobs where kind = 'send-email' and state = 'completed'`,
          )
        ).rows[0]?.n === 4;
      await until(emailsDone, 30_000, 'the burst of nudged jobs');

      const report = await enqueue({ kind: 'build-report', payload: { reportId: 'r-1', sections: 1 } });
      expect(report.status).toBe(200);
      expect(await states()).toMatchObject({ 'build-report': 'queued' });
      const refused = await fetch(`${origin}/api/reports-worker`, { headers: { authorization: 'Bearer wrong' } });
      expect(refused.status).toBe(401);
      // What Vercel's cron sends: GET with the bearer CRON_SECRET. It answers when it is done.
      const cron = await fetch(`${origin}/api/reports-worker`, {
        headers: { authorization: `Bearer ${secrets.CRON_SECRET}` },
      });
      expect(cron.status).toBe(200);
      const ran = (await cron.json()) as Record<string, unknown>;
      expect(ran).toMatchObject({ claimed: 1, completed: 1, stoppedBecause: 'drained' });
      expect(await states()).toMatchObject({ 'build-report': 'completed' });
      // Off Vercel (no VERCEL=1) functions/idle-hints.ts has no store: no idle check (no `woke`),
      // and the next tick, with nothing to do, queries the database again rather than answer idle.
      expect(ran.woke).toBeUndefined();
      const again = await fetch(`${origin}/api/reports-worker`, {
        headers: { authorization: `Bearer ${secrets.CRON_SECRET}` },
      });
      expect(await again.json()).toMatchObject({ claimed: 0, stoppedBecause: 'drained' });
    } finally {
      await db.end();
    }

    // The console at /admin: a log-in page, then the job's page behind the session cookie.
    const anonymous = await fetch(`${origin}/admin`, { redirect: 'manual' });
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get('location')).toMatch(/\/admin\/login\?next=/);
    const login = await fetch(`${origin}/admin/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: secrets.SKIPLOCK_ADMIN_TOKEN, name: 'ci', next: '/admin/jobs/1' }),
    });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/admin/jobs/1');
    const cookie = /^([^;]+)/.exec(login.headers.get('set-cookie') ?? '')?.[1];
    expect(cookie).toMatch(/^__Host-skiplock-console=/);
    const page = await fetch(`${origin}/admin/jobs/1`, { headers: { cookie: cookie! } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('send-email');
    expect(html).toContain('completed');
    // The same server by its address, as a browser on http://127.0.0.1:PORT/admin (or a proxy that
    // keeps the Host) reaches it: `next start` reports request.url as localhost whatever the Host,
    // and the login still works — the Origin is compared with the Host header.
    const byAddress = `http://127.0.0.1:${port}`;
    const loginFrom = (from: string) =>
      fetch(`${byAddress}/admin/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: from, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: secrets.SKIPLOCK_ADMIN_TOKEN, name: 'ci', next: '/admin/' }),
      });
    const local = await loginFrom(byAddress);
    expect(local.status).toBe(303);
    expect(local.headers.get('set-cookie')).toMatch(/^__Host-skiplock-console=/);
    // Nothing went wrong on the server's side.
    expect(serverLog).not.toMatch(/"level":"(error|warn)"|Error:/);
    // A form from another site is still refused, and logged as such.
    const forged = await loginFrom('https://evil.example.com');
    expect(forged.status).toBe(403);
    expect(forged.headers.get('set-cookie')).toBeNull();
    expect(await forged.text()).toContain('this form was not sent from the console');
    await until(async () => serverLog.includes('"reason":"cross_origin"'), 10_000, 'the cross_origin log line');
  }, 120_000);

  it("with a Runtime Cache (as on Vercel), a cron tick with nothing due answers from its hint: the routes reach @vercel/functions' getCache", async () => {
    // Vercel's Runtime Cache client talks to RUNTIME_CACHE_ENDPOINT; a local stand-in serves it.
    const headers = { authorization: 'Bearer runtime-cache-token-for-next' };
    const cache = await startRuntimeCacheEndpoint(headers);
    try {
      const port = await startNext({
        RUNTIME_CACHE_ENDPOINT: cache.endpoint,
        RUNTIME_CACHE_HEADERS: JSON.stringify(headers),
      });
      const tick = async () =>
        (await fetch(`http://localhost:${port}/api/reports-worker`, {
          headers: { authorization: `Bearer ${secrets.CRON_SECRET}` },
        }).then((r) => r.json())) as Record<string, unknown>;
      expect(await tick()).toMatchObject({ woke: 'no-hint', claimed: 0, stoppedBecause: 'drained' });
      expect(await tick()).toMatchObject({ idle: true });
      // Written under getCache's namespace `skiplock` (its key hashed), as skiplock's default store does.
      expect(cache.requests.filter((r) => r.method === 'POST').map((r) => r.key)).toEqual(
        expect.arrayContaining([expect.stringMatching(/^skiplock\$[0-9a-f]+$/)]),
      );
      expect(serverLog).not.toMatch(/idle_hints_failed|"level":"(error|warn)"/);
    } finally {
      server?.kill('SIGKILL');
      await cache.close();
    }
  }, 120_000);
});
