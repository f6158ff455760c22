import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ConsoleHttpEvent, createLambdaConsole } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelConsole } from '../../adapters/vercel.js';
import { pause } from '../../core/controls.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { COOKIE, ConsoleClient, charge } from '../helpers/console.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';
import { captureStdout } from '../helpers/stdout.js';
import { SECRETS } from '../helpers/vercel-routes.js';

let t: TestContext;
useTestSchema('functions-console', (ctx) => {
  t = ctx;
});
/** One env object per configuration: the shared runtime (and its pool) is kept per env object. */
const envs = new Map<string, Record<string, string | undefined>>();
afterEach(async () => {
  envs.clear();
  await resetSharedRuntime();
});

const ADMIN = SECRETS.SKIPLOCK_ADMIN_TOKEN;
const VIEWER = 'viewer-token-0123456789abcdef';
const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'info',
  SKIPLOCK_ADMIN_TOKEN: ADMIN,
  SKIPLOCK_CONSOLE_VIEWER_TOKEN: VIEWER,
  // As on Vercel, whose edge sets x-real-ip: the console trusts it (see the self-hosted test).
  VERCEL: '1',
  ...extra,
});

/** The wall clock the console's statements use: moved by the tests, never slept on. */
let now = new Date();
const clock = () => now;
const envFor = (extra: Record<string, string | undefined>) => {
  const key = JSON.stringify(extra);
  if (!envs.has(key)) envs.set(key, env(extra));
  return envs.get(key) as Record<string, string | undefined>;
};
const consoleRoute = (extra: Record<string, string | undefined> = {}) =>
  createVercelConsole([sendEmail, charge], { env: envFor(extra), now: clock });
const client = (extra: Record<string, string | undefined> = {}, ip?: string) =>
  new ConsoleClient(consoleRoute(extra), 'https://app.example.com', ip);

const rows = async (sql: string, params: unknown[] = []) => (await t.admin.query(sql, params)).rows;
const jobState = async (id: string) =>
  (await rows(`select state, dead_reason, replayed_by from "${t.schema}".jobs where id = $1`, [id]))[0];

/** A job in the DLQ (max_attempts), written as a worker would leave it. */
async function deadJob(to = 'dead@example.com'): Promise<string> {
  const [result] = await enqueuerFor(t.schema).enqueueMany(t.db, [sendEmail.with({ to, subject: 's' })]);
  const id = (result as { id: string }).id;
  await t.admin.query(
    `update "${t.schema}".jobs set state = 'dead', dead_reason = 'max_attempts', finished_at = now(), attempt = 3,
      last_error = '{"class":"Error","message":"smtp said no"}', errors = '[{"class":"Error","message":"smtp said no","attempt":3,"responseStatus":550,"responseBody":"mailbox unavailable"}]'
     where id = $1`,
    [id],
  );
  return id;
}

describe(`the console's login and sessions (${testDriver()})`, () => {
  it('is off without an admin token of 16+ characters, and says so without a stack', async () => {
    for (const token of [undefined, 'short']) {
      const page = await client({ SKIPLOCK_ADMIN_TOKEN: token }).get('/admin/');
      expect(page.status).toBe(503);
      expect(page.html).toContain('the console is off until SKIPLOCK_ADMIN_TOKEN is set');
      expect(page.html).not.toMatch(/at .*\.ts:\d+/);
    }
  });

  it('sends a visitor without a session to the login page, and back where they were after it', async () => {
    now = new Date();
    const c = client();
    const first = await c.get('/admin/dlq?kind=send-email');
    expect(first.status).toBe(303);
    expect(first.headers.get('location')).toBe('/admin/login?next=%2Fadmin%2Fdlq%3Fkind%3Dsend-email');
    const wrong = await c.post('/admin/login', { token: 'not-the-token-at-all', name: 'ada', next: '/admin/dlq' });
    expect(wrong.status).toBe(401);
    expect(wrong.html).toContain('That token is not right.');
    expect(c.cookie).toBeUndefined();
    const { result: right, lines } = await captureStdout(() =>
      c.post('/admin/login', { token: ADMIN, name: 'ada', next: '/admin/dlq?kind=send-email' }),
    );
    expect(right.status).toBe(303);
    expect(right.headers.get('location')).toBe('/admin/dlq?kind=send-email');
    const [cookie] = right.headers.getSetCookie();
    expect(cookie).toMatch(
      new RegExp(`^${COOKIE}=[A-Za-z0-9_-]{43}; Path=/; Max-Age=28800; HttpOnly; Secure; SameSite=Strict$`),
    );
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'console_login', who: 'ada', client: '203.0.113.7', readOnly: false }),
    );
    // The table keeps a hash of the cookie's secret, never the secret.
    const [session] = await rows(`select id, who from "${t.schema}".console_sessions`);
    expect(session.who).toBe('ada');
    expect(session.id).not.toContain(c.cookie);
    expect((await c.get('/admin/dlq')).status).toBe(200);
    // An open redirect is not possible: `next` outside the console goes to the overview.
    const other = client();
    const away = await other.post('/admin/login', { token: ADMIN, next: '//evil.example.com/admin' });
    expect(away.headers.get('location')).toBe('/admin/');
  });

  it('serves every page with a CSP that allows no script, no framing, and nothing cached', async () => {
    now = new Date();
    const c = client();
    await c.login(ADMIN);
    const id = await deadJob();
    for (const path of ['/admin/', '/admin/jobs', '/admin/dlq', `/admin/jobs/${id}`, '/admin/flow', '/admin/login']) {
      const page = await c.get(path);
      expect(page.status, path).toBe(200);
      const csp = page.headers.get('content-security-policy') ?? '';
      expect(csp).toMatch(/^default-src 'none'; style-src 'nonce-[A-Za-z0-9+/=]+';/);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('script-src');
      expect(page.html).not.toMatch(/<script/i);
      expect(page.headers.get('x-frame-options')).toBe('DENY');
      expect(page.headers.get('cache-control')).toBe('no-store');
      // No secret, password or connection string anywhere.
      for (const secret of [ADMIN, VIEWER, databaseUrl(), 'postgres://', 'postgresql://']) {
        expect(page.html, `${path} holds a secret`).not.toContain(secret);
      }
    }
  });

  it('throttles failed logins per client address across instances, and lets them in once the window passes', async () => {
    now = new Date('2026-11-23T10:00:00Z');
    const attacker = client({}, '198.51.100.9');
    for (let i = 0; i < 5; i++) {
      expect((await attacker.post('/admin/login', { token: `wrong-token-number-${i}-xx` })).status).toBe(401);
    }
    // Another instance of the function (a new route object) sees the same block; so does the right token.
    const { result: blocked, lines } = await captureStdout(() =>
      client({}, '198.51.100.9').post('/admin/login', { token: ADMIN }),
    );
    expect(blocked.status).toBe(429);
    expect(blocked.html).toContain('Too many failed logins. Try again after 2026-11-23T10:15:00.000Z');
    expect(lines.join('')).toContain('console_login_blocked');
    // Someone else is not blocked by it.
    expect((await client({}, '192.0.2.1').post('/admin/login', { token: ADMIN })).status).toBe(303);
    await client({}, '192.0.2.99').post('/admin/login', { token: 'one-wrong-token-only-xx' });
    now = new Date('2026-11-23T10:15:01Z');
    expect((await client({}, '198.51.100.9').post('/admin/login', { token: ADMIN })).status).toBe(303);
    // Counts whose window and block have passed go with the next failure: the table does not grow.
    now = new Date('2026-11-23T10:31:00Z');
    await client({}, '192.0.2.50').post('/admin/login', { token: 'another-wrong-token-xx' });
    expect(
      (await rows(`select client from "${t.schema}".console_logins order by client`)).map((r) => r.client),
    ).toEqual(['*', 'ip:192.0.2.50']);
  });

  it('self-hosted (not on Vercel): client-sent address headers are not trusted, and a shared bucket never locks out the right token', async () => {
    now = new Date('2026-11-23T13:00:00Z');
    const selfHosted = { VERCEL: undefined };
    // Six guesses, each with another x-real-ip: one bucket (the headers are ignored), so the sixth is refused.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push(
        (await client(selfHosted, `203.0.113.${100 + i}`).post('/admin/login', { token: `rotating-guess-${i}-xx` }))
          .status,
      );
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    // The bucket is everyone's: the right token still gets in; a wrong one is still refused.
    expect(
      (await client(selfHosted, '198.51.100.1').post('/admin/login', { token: 'still-wrong-token-xx' })).status,
    ).toBe(429);
    expect((await client(selfHosted, '198.51.100.1').post('/admin/login', { token: ADMIN })).status).toBe(303);
    // Trusted when configured (a proxy of yours sets the header): per address again.
    // (VERCEL '0', not undefined: envFor keys the env by its JSON, where undefined vanishes.)
    const trusted = { VERCEL: '0', SKIPLOCK_CONSOLE_TRUST_PROXY: 'true' };
    expect((await client(trusted, '192.0.2.77').post('/admin/login', { token: 'first-wrong-token-xx' })).status).toBe(
      401,
    );
  });

  it('counts an attempt before comparing its token: 20 guesses at once from one address get 5 tries', async () => {
    now = new Date('2026-11-23T11:00:00Z');
    const statuses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        client({}, '198.51.100.77')
          .post('/admin/login', { token: `concurrent-wrong-token-${i}` })
          .then((r) => r.status),
      ),
    );
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
  });

  it('a flood of failures from many addresses is logged, and never locks the admin out', async () => {
    now = new Date('2026-11-23T12:00:00Z');
    const { lines } = await captureStdout(async () => {
      for (let host = 1; host <= 11; host++) {
        for (let i = 0; i < 5; i++)
          await client({}, `203.0.113.${host}`).post('/admin/login', { token: `flood-${i}-wrong-token` });
      }
    });
    expect(lines.filter((l) => l.includes('console_login_flood')).length).toBeGreaterThan(0);
    expect((await client({}, '192.0.2.200').post('/admin/login', { token: ADMIN })).status).toBe(303);
  });

  it('ends a session when it expires, on logout, and when the admin token changes', async () => {
    now = new Date('2026-11-23T10:00:00Z');
    const id = await deadJob();
    const c = client();
    await c.login(ADMIN);
    const csrf = c.csrf;
    now = new Date('2026-11-23T17:59:00Z');
    expect((await c.get('/admin/')).status).toBe(200);
    now = new Date('2026-11-23T18:00:01Z');
    const late = await c.post('/admin/actions', { csrf, action: 'replay', ids: id, confirmed: '1' });
    expect(late.status).toBe(401);
    expect(late.html).toContain('Log in again: nothing was changed.');
    expect((await jobState(id)).state).toBe('dead');
    expect((await c.get('/admin/')).status).toBe(303);

    const d = client();
    await d.login(ADMIN);
    const cookie = d.cookie;
    expect((await d.post('/admin/logout', { csrf: d.csrf })).headers.get('location')).toBe('/admin/login');
    expect(d.cookie).toBeUndefined();
    d.cookie = cookie;
    expect((await d.get('/admin/')).status).toBe(303);

    const e = client();
    await e.login(ADMIN);
    const rotated = new ConsoleClient(consoleRoute({ SKIPLOCK_ADMIN_TOKEN: 'a-brand-new-admin-token-value' }));
    rotated.cookie = e.cookie;
    expect((await rotated.get('/admin/')).status).toBe(303);
  });
});

describe(`the console's Origin check (${testDriver()})`, () => {
  /** A login form as a browser on `origin` sends it, to a server that reports the URL `url`. */
  const loginForm = (url: string, headers: Record<string, string>) =>
    new Request(`${url}/admin/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-real-ip': '203.0.113.7', ...headers },
      body: new URLSearchParams({ token: ADMIN, name: 'ada', next: '/admin/' }).toString(),
    });

  it('compares the Origin with the Host header, not the URL the server reports (next start says localhost)', async () => {
    now = new Date();
    const route = consoleRoute();
    // `next start` reports request.url as http://localhost:3000/… whatever Host the browser sent.
    const browser = { host: '127.0.0.1:3000', origin: 'http://127.0.0.1:3000' };
    const login = await route(loginForm('http://localhost:3000', browser));
    expect(login.status).toBe(303);
    expect(login.headers.getSetCookie()[0]).toMatch(new RegExp(`^${COOKIE}=`));
    // A real host name in front of the app, its Host kept: the same.
    const named = await route(
      loginForm('http://localhost:3000', { host: 'ops.example.com', origin: 'https://ops.example.com' }),
    );
    expect(named.status).toBe(303);
    // The host's case and the scheme's default port do not matter.
    const spelled = await route(
      loginForm('http://localhost:3000', { host: 'Ops.Example.com:443', origin: 'https://ops.example.com' }),
    );
    expect(spelled.status).toBe(303);
  });

  it('still refuses a form whose Origin names another host, whatever the URL or the Host say', async () => {
    now = new Date();
    const route = consoleRoute();
    const { result, lines } = await captureStdout(async () => [
      await route(loginForm('http://localhost:3000', { host: '127.0.0.1:3000', origin: 'https://evil.example.com' })),
      // The URL's host does not let another origin in either.
      await route(loginForm('http://localhost:3000', { host: '127.0.0.1:3000', origin: 'http://localhost:3000' })),
      await route(loginForm('https://app.example.com', { origin: 'https://evil.example.com' })),
      await route(loginForm('https://app.example.com', { host: 'app.example.com', origin: 'null' })),
    ]);
    expect(result.map((r) => r.status)).toEqual([403, 403, 403, 403]);
    expect(result.every((r) => r.headers.getSetCookie().length === 0)).toBe(true);
    expect(lines.filter((l) => l.includes('"reason":"cross_origin"'))).toHaveLength(4);
    expect(await rows(`select count(*)::int as n from "${t.schema}".console_sessions`)).toEqual([{ n: 0 }]);
  });

  it('takes X-Forwarded-Host only where proxy headers are trusted (Vercel, SKIPLOCK_CONSOLE_TRUST_PROXY)', async () => {
    now = new Date();
    // A proxy of yours in front: the function sees its own Host, the proxy says which one the browser used.
    const proxied = { host: 'internal:3000', 'x-forwarded-host': 'ops.example.com', origin: 'https://ops.example.com' };
    expect((await consoleRoute()(loginForm('http://internal:3000', proxied))).status).toBe(303);
    // (VERCEL '0', not undefined: envFor keys the env by its JSON, where undefined vanishes.)
    const trusted = { VERCEL: '0', SKIPLOCK_CONSOLE_TRUST_PROXY: 'true' };
    expect((await consoleRoute(trusted)(loginForm('http://internal:3000', proxied))).status).toBe(303);
    // Self-hosted without trust, the header is whatever the client sent: not read.
    expect((await consoleRoute({ VERCEL: '0' })(loginForm('http://internal:3000', proxied))).status).toBe(403);
    // The `origin` option names the one origin accepted.
    const pinned = createVercelConsole([sendEmail], { env: envFor({}), now: clock, origin: 'https://ops.example.com' });
    expect(
      (await pinned(loginForm('http://internal:3000', { host: 'internal:3000', origin: 'https://ops.example.com' })))
        .status,
    ).toBe(303);
    expect(
      (await pinned(loginForm('http://internal:3000', { host: 'internal:3000', origin: 'http://internal:3000' })))
        .status,
    ).toBe(403);
  });
});

describe(`the console's actions (${testDriver()})`, () => {
  it('refuses an action without the CSRF token, with a wrong one, or from another origin, and changes nothing', async () => {
    now = new Date();
    const id = await deadJob();
    const c = client();
    await c.login(ADMIN);
    const csrf = c.csrf;
    const missing = await c.post('/admin/actions', { action: 'replay', ids: id, confirmed: '1' });
    expect(missing.status).toBe(403);
    expect(missing.html).toContain('did not come from the console; nothing was changed');
    expect(
      (await c.post('/admin/actions', { csrf: `${csrf}x`, action: 'replay', ids: id, confirmed: '1' })).status,
    ).toBe(403);
    const cross = await c.post(
      '/admin/actions',
      { csrf, action: 'replay', ids: id, confirmed: '1' },
      { origin: 'https://evil.example.com' },
    );
    expect(cross.status).toBe(403);
    expect((await jobState(id)).state).toBe('dead');
    // The same form with the token works.
    const ok = await c.post('/admin/actions', { csrf, action: 'replay', ids: id, confirmed: '1' });
    expect(ok.status).toBe(200);
    expect(await jobState(id)).toMatchObject({ state: 'queued', replayed_by: 'console:ada' });
  });

  it('an action that went through nudges the worker routes; a page, a refused login and a refused action do not', async () => {
    now = new Date();
    const id = await deadJob();
    const nudged: string[][] = [];
    const nudger = { nudge: async (queues: Iterable<string>) => void nudged.push([...queues]) };
    const extra = { SKIPLOCK_NUDGE_ROUTES: 'reports=/api/reports-worker;*=/api/worker' };
    const route = createVercelConsole([sendEmail, charge], { env: envFor(extra), now: clock, nudger });
    const c = new ConsoleClient(route, 'https://app.example.com');
    const wrong = await c.post('/admin/login', { token: 'not-the-admin-token-at-all', name: 'ada', next: '/admin/' });
    expect(wrong.status).toBe(401);
    await c.login(ADMIN);
    await c.get('/admin/');
    expect(nudged).toEqual([]);
    const refused = await c.post('/admin/actions', { csrf: `${c.csrf}x`, action: 'replay', ids: id, confirmed: '1' });
    expect(refused.status).toBe(403);
    expect(nudged).toEqual([]);
    const ok = await c.post('/admin/actions', { csrf: c.csrf, action: 'replay', ids: id, confirmed: '1' });
    expect(ok.status).toBe(200);
    expect((await jobState(id)).state).toBe('queued');
    expect(nudged).toEqual([['reports', '*']]);
  });

  it('asks before each action, then makes it through the core functions, logs who did it and reports it', async () => {
    now = new Date();
    const c = client();
    await c.login(ADMIN, 'Grace Hopper');
    const [queued, running, later] = (
      await enqueuerFor(t.schema).enqueueMany(t.db, [
        sendEmail.with({ to: 'a@example.com', subject: 's' }),
        sendEmail.with({ to: 'b@example.com', subject: 's' }),
        sendEmail.with({ to: 'c@example.com', subject: 's' }, { delayMs: 3_600_000 }),
      ])
    ).map((r) => (r as { id: string }).id) as [string, string, string];
    const csrf = c.csrf;
    const ask = await c.post('/admin/actions', { csrf, action: 'move_to_dlq', id: [queued, '999999'] });
    expect(ask.status).toBe(200);
    expect(ask.html).toContain('Move to DLQ 2 job(s)?');
    expect((await jobState(queued)).state).toBe('queued');
    const { result: done, lines } = await captureStdout(() =>
      c.post('/admin/actions', { csrf, action: 'move_to_dlq', ids: `${queued},999999`, confirmed: '1' }),
    );
    expect(done.html).toContain('Move to DLQ: 1 of 2 job(s)');
    expect(done.html).toContain('#999999</a> does not exist');
    expect(await jobState(queued)).toMatchObject({ state: 'dead', dead_reason: 'manual' });
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'console_action', action: 'move_to_dlq', by: 'console:Grace Hopper', changed: 1 }),
    );
    const [history] = await rows(`select errors from "${t.schema}".jobs where id = $1`, [queued]);
    expect(history.errors.at(-1)).toMatchObject({
      class: 'moved_to_dlq',
      message: 'moved to the DLQ by console:Grace Hopper',
    });

    await c.post('/admin/actions', { csrf, action: 'retry_now', ids: later, confirmed: '1' });
    const [due] = await rows(`select run_at <= now() as due from "${t.schema}".jobs where id = $1`, [later]);
    expect(due.due).toBe(true);
    await c.post('/admin/actions', { csrf, action: 'cancel', ids: running, confirmed: '1' });
    expect((await jobState(running)).state).toBe('cancelled');

    await c.post('/admin/actions', {
      csrf,
      action: 'pause',
      scope: 'queue',
      name: 'emails',
      reason: 'smtp down',
      confirmed: '1',
    });
    expect(await rows(`select name, paused_by, reason from "${t.schema}".pauses`)).toEqual([
      { name: 'emails', paused_by: 'console:Grace Hopper', reason: 'smtp down' },
    ]);
    expect((await c.get('/admin/flow')).html).toContain('smtp down');
    await c.post('/admin/actions', { csrf, action: 'resume', scope: 'queue', name: 'emails', confirmed: '1' });
    expect(await rows(`select * from "${t.schema}".pauses`)).toEqual([]);

    await t.admin.query(
      `insert into "${t.schema}".destinations (name, state, opened_at, open_until, trips)
       values ('api.partner.example', 'open', now(), now() + interval '1 minute', 1)`,
    );
    expect((await c.get('/admin/flow')).html).toContain('api.partner.example');
    const reset = await c.post('/admin/actions', {
      csrf,
      action: 'reset_breaker',
      destination: 'api.partner.example',
      confirmed: '1',
    });
    expect(reset.html).toContain('Reset the breaker of api.partner.example');
    const [breaker] = await rows(`select state from "${t.schema}".destinations`);
    expect(breaker.state).toBe('closed');
  });

  it('replays every dead job a filter matches after a dry run that lists exactly those jobs', async () => {
    now = new Date();
    const a = await deadJob('a@example.com');
    const b = await deadJob('b@example.com');
    const other = await deadJob('c@example.com');
    await t.admin.query(`update "${t.schema}".jobs set dead_reason = 'lease_expired' where id = $1`, [other]);
    const c = client();
    await c.login(ADMIN);
    const list = await c.get('/admin/dlq?reason=max_attempts');
    expect(list.html).toContain(`/admin/jobs/${a}`);
    expect(list.html).not.toContain(`/admin/jobs/${other}"`);
    const dry = await c.post('/admin/actions', { csrf: c.csrf, action: 'replay_matching', reason: 'max_attempts' });
    expect(dry.html).toContain('Dry run: 2 dead job(s) match');
    expect(await rows(`select count(*)::int as n from "${t.schema}".jobs where state = 'dead'`)).toEqual([{ n: 3 }]);
    // Another job dies between the dry run and the confirmation: it is not replayed with the ones shown.
    const late = await deadJob('d@example.com');
    const ids = /name="ids" value="([^"]+)"/.exec(dry.html)?.[1] as string;
    expect(ids.split(',').sort()).toEqual([a, b].sort());
    await c.post('/admin/actions', { csrf: c.csrf, action: 'replay', ids, confirmed: '1' });
    for (const id of [a, b]) expect((await jobState(id)).state).toBe('queued');
    for (const id of [other, late]) expect((await jobState(id)).state).toBe('dead');
  });

  it('pages through a long DLQ, newest first, keeping the filters', async () => {
    now = new Date();
    await t.admin.query(
      `insert into "${t.schema}".jobs (kind, queue, payload, state, finished_at, dead_reason, attempt)
       select 'send-email', 'emails', '{}', 'dead', now(), 'max_attempts', 3 from generate_series(1, 105)`,
    );
    const c = client();
    await c.login(ADMIN);
    const ids = (html: string) => [...html.matchAll(/name="id" value="(\d+)"/g)].map((m) => Number(m[1]));
    const first = await c.get('/admin/dlq?reason=max_attempts');
    const page1 = ids(first.html);
    expect(page1).toHaveLength(100);
    expect(page1).toEqual([...page1].sort((a, b) => b - a));
    const older = /href="([^"]+)">Older →/.exec(first.html)?.[1]?.replaceAll('&amp;', '&') as string;
    expect(older).toBe(`/admin/dlq?reason=max_attempts&before=${page1.at(-1)}`);
    const second = await c.get(older);
    const page2 = ids(second.html);
    expect(page2).toHaveLength(5);
    expect(Math.max(...page2)).toBeLessThan(Math.min(...page1));
    expect(second.html).not.toContain('Older →');
    expect(second.html).toContain('← Newest');
    expect((await c.get('/admin/dlq?before=abc')).status).toBe(400);
  });

  it('logs console_action_refused for a read-only session, a cross-origin form and an action that failed', async () => {
    now = new Date();
    const id = await deadJob();
    const viewer = client();
    await viewer.login(VIEWER);
    await viewer.get('/admin/dlq');
    const admin = client({}, '198.51.100.9');
    await admin.login(ADMIN);
    await admin.get('/admin/flow');
    const adminCsrf = admin.csrf;
    const { lines } = await captureStdout(async () => {
      expect(
        (await viewer.post('/admin/actions', { csrf: viewer.csrf, action: 'replay', ids: id, confirmed: '1' })).status,
      ).toBe(403);
      const cross = await admin.post(
        '/admin/actions',
        { csrf: adminCsrf, action: 'replay', ids: id, confirmed: '1' },
        { origin: 'https://evil.example.com' },
      );
      expect(cross.status).toBe(403);
      // A queue name the core refuses: nothing changes.
      const failed = await admin.post('/admin/actions', {
        csrf: adminCsrf,
        action: 'pause',
        scope: 'queue',
        name: 'no such queue!',
        confirmed: '1',
      });
      expect(failed.status).toBe(400);
    });
    const refused = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'console_action_refused');
    expect(refused.map((l) => [l.level, l.reason, l.action ?? null])).toEqual([
      ['warn', 'read_only', 'replay'],
      ['warn', 'cross_origin', null],
      ['warn', 'failed', 'pause'],
    ]);
    expect(refused[0]).toMatchObject({ by: expect.stringMatching(/^console:/) });
    expect(refused[2].error).toMatch(/queue/i);
    expect((await jobState(id)).state).toBe('dead');
  });

  it('gives a read-only session every page and no change: viewer token, or SKIPLOCK_CONSOLE_READ_ONLY', async () => {
    now = new Date();
    const id = await deadJob();
    for (const [token, extra] of [
      [VIEWER, {}],
      [ADMIN, { SKIPLOCK_CONSOLE_READ_ONLY: 'true' }],
    ] as const) {
      const c = client(extra);
      await c.login(token);
      const dlq = await c.get('/admin/dlq');
      expect(dlq.html).toContain('read-only');
      expect(dlq.html).not.toContain('Replay selected');
      const tried = await c.post('/admin/actions', { csrf: c.csrf, action: 'replay', ids: id, confirmed: '1' });
      expect(tried.status).toBe(403);
      expect((await jobState(id)).state).toBe('dead');
    }
  });

  it('masks the payload on the job page and shows the attempt timeline with the response', async () => {
    now = new Date();
    const [result] = await enqueuerFor(t.schema).enqueueMany(t.db, [
      charge.with({ customer: 'cus_1', card: { number: '4242424242424242', last4: '4242' }, apiKey: 'sk_live_abcdef' }),
    ]);
    const id = (result as { id: string }).id;
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'dead', dead_reason = 'http_4xx', finished_at = now(), attempt = 1,
        errors = '[{"class":"HttpError","message":"partner refused","attempt":1,"responseStatus":422,"responseBody":"{\\"error\\":\\"card declined\\"}"},{"class":"Error","message":"could not reach postgres://billing:FAKE-test-secret@db.internal/app","attempt":2}]'
       where id = $1`,
      [id],
    );
    const c = client();
    await c.login(ADMIN);
    const page = await c.get(`/admin/jobs/${id}`);
    expect(page.html).not.toContain('4242424242424242');
    expect(page.html).not.toContain('sk_live_abcdef');
    expect(page.html).not.toContain('FAKE-test-secret');
    expect(page.html).toContain('postgres://billing:***@db.internal/app');
    expect(page.html).toContain('&quot;last4&quot;: &quot;4242&quot;');
    expect(page.html).toContain('HTTP 422');
    expect(page.html).toContain('card declined');
    expect(page.html).toContain('>Replay</button>');
  });

  it("shows a job's durable steps: each with its state and attempts, a wait's key, a failed step's masked error", async () => {
    now = new Date();
    let failing = true;
    const onboarding = defineJob({
      kind: 'onboarding',
      payload: z.object({ user: z.string() }),
      backoff: { type: 'constant', delayMs: 0 },
      handler: async (p, ctx) => {
        await ctx.step('welcome-mail', () => ({ messageId: 'm-1' }));
        await ctx.step('crm-sync', () => {
          if (failing) {
            failing = false;
            throw new Error('crm refused postgres://crm:FAKE-step-secret@crm.internal/db');
          }
        });
        await ctx.waitForSignal('activated', { key: `activate:${p.user}`, timeoutMs: 3_600_000 });
      },
    });
    const [queued] = await enqueuerFor(t.schema).enqueueMany(t.db, [onboarding.with({ user: 'ada' })]);
    const id = (queued as { id: string }).id;
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [onboarding],
      logger: silentLogger,
    }).runInvocation({
      remainingMs: 60_000,
    });
    expect(summary).toMatchObject({ retried: 1, suspended: 1 });
    const c = client();
    await c.login(ADMIN);
    const page = await c.get(`/admin/jobs/${id}`);
    expect(page.html).toContain('<h2>Steps <span class="muted">3</span></h2>');
    expect(page.html).toMatch(
      /<code>welcome-mail<\/code><\/td><td>run<\/td>\s*<td><span class="badge completed">completed<\/span><\/td><td class="n">1<\/td>/,
    );
    expect(page.html).toContain('<code>crm-sync</code>');
    expect(page.html).toContain('crm refused postgres://crm:***@crm.internal/db');
    expect(page.html).not.toContain('FAKE-step-secret');
    expect(page.html).toContain('waiting</span> for signal <code>activate:ada</code> until ');
    expect(page.html).toMatch(
      /waiting<\/span> for signal <code>activate:ada<\/code> until [\d-]+ [\d:]+Z \(step activated\)/,
    );
    // The "why" panel: explain() on the job page.
    expect(page.html).toContain('<h3>Why it does not run now</h3>');
    expect(page.html).toMatch(
      /<code>waiting_for_signal<\/code> it waits for the signal &quot;activate:ada&quot; \(step activated\)/,
    );
  });

  it('answers bad input with a clear page and no change', async () => {
    now = new Date();
    const c = client();
    await c.login(ADMIN);
    expect((await c.get('/admin/jobs/abc')).status).toBe(404);
    expect((await c.get('/admin/jobs/123456789')).status).toBe(404);
    const since = await c.get('/admin/dlq?since=yesterday');
    expect(since.status).toBe(400);
    expect(since.html).toContain('since must be 1h, 24h, 7d or a date');
    const bad = await c.post('/admin/actions', { csrf: c.csrf, action: 'replay', ids: '1;drop table', confirmed: '1' });
    expect(bad.status).toBe(400);
    expect(bad.html).toContain('not a job id');
    const huge = await c.post('/admin/actions', { csrf: c.csrf, action: 'replay', ids: '1'.repeat(300_000) });
    expect(huge.status).toBe(413);
    const unknown = await c.post('/admin/actions', { csrf: c.csrf, action: 'drop_everything', confirmed: '1' });
    expect(unknown.status).toBe(400);
    for (const name of ['constructor', '__proto__', 'toString']) {
      expect((await c.post('/admin/actions', { csrf: c.csrf, action: name, confirmed: '1' })).status).toBe(400);
      expect((await c.get(`/admin/dlq?since=${name}`)).status).toBe(400);
    }
    expect(
      (await c.post('/admin/actions', { csrf: c.csrf, action: 'replay_matching', since: '__proto__' })).status,
    ).toBe(400);
    const euro = await client().post('/admin/login', { token: ADMIN, next: '/admin/€' });
    expect(euro.status).toBe(303);
    expect(euro.headers.get('location')).toBe('/admin/');
    // A dead database: the page says so, without the connection string.
    const down = new ConsoleClient(consoleRoute({ DATABASE_URL: 'postgres://u:hunter2secret@127.0.0.1:9/none' }));
    await resetSharedRuntime();
    const page = await down.get('/admin/');
    expect(page.status).toBe(303);
    const login = await down.post('/admin/login', { token: ADMIN });
    expect(login.status).toBe(503);
    expect(login.html).toContain('the database is unavailable');
    expect(login.html).not.toContain('hunter2secret');
  });
});

describe(`the console on Lambda (${testDriver()})`, () => {
  const event = (method: string, path: string, extra: Partial<ConsoleHttpEvent> = {}): ConsoleHttpEvent => ({
    rawPath: path.split('?')[0],
    rawQueryString: path.split('?')[1] ?? '',
    headers: { host: 'abc.execute-api.us-east-1.amazonaws.com' },
    requestContext: { http: { method, sourceIp: '198.51.100.20' } },
    ...extra,
  });

  it('logs in over the HTTP API (cookies in the event and the result) and replays a job, nudging the workers', async () => {
    now = new Date();
    const id = await deadJob();
    const nudged: string[][] = [];
    const nudger = { nudge: async (queues: Iterable<string>) => void nudged.push([...queues]) };
    const handler = createLambdaConsole([sendEmail], {
      env: env({ SKIPLOCK_NUDGE_FUNCTIONS: 'emails=app-worker;*=app-worker' }),
      now: clock,
      nudger,
    });
    const form = (fields: Record<string, string>) => ({
      headers: {
        host: 'abc.execute-api.us-east-1.amazonaws.com',
        'content-type': 'application/x-www-form-urlencoded',
        origin: 'https://abc.execute-api.us-east-1.amazonaws.com',
      },
      body: Buffer.from(new URLSearchParams(fields).toString()).toString('base64'),
      isBase64Encoded: true,
    });
    const login = await handler(event('POST', '/admin/login', form({ token: ADMIN, name: 'ops' })));
    expect(login.statusCode).toBe(303);
    const cookie = (login.cookies[0] as string).split(';')[0] as string;
    const page = await handler(event('GET', '/admin/dlq', { cookies: [cookie] }));
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)?.[1] as string;
    const done = await handler(
      event('POST', '/admin/actions', {
        ...form({ csrf, action: 'replay', ids: id, confirmed: '1' }),
        cookies: [cookie],
      }),
    );
    expect(done.statusCode).toBe(200);
    expect(await jobState(id)).toMatchObject({ state: 'queued', replayed_by: 'console:ops' });
    // The action started the workers (on an idle app the replayed job would wait for a wake-up); the
    // login and the page did not.
    expect(nudged).toEqual([['emails', '*']]);
  });
});

describe(`the overview (${testDriver()})`, () => {
  it('counts each queue and kind and charts the last hour and day, including a paused queue', async () => {
    now = new Date();
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      sendEmail.with({ to: 'a@example.com', subject: 's' }),
      sendEmail.with({ to: 'b@example.com', subject: 's' }),
    ]);
    await deadJob();
    await t.admin.query(
      `insert into "${t.schema}".completed_counts (minute, queue, kind, completed)
       values (date_trunc('minute', now()) - interval '5 minutes', 'emails', 'send-email', 7)`,
    );
    await pause(t.db, { queue: 'emails' }, { schema: t.schema, by: 'test' });
    now = new Date(Date.now() + 1_000);
    const c = client();
    await c.login(ADMIN);
    const page = await c.get('/admin/');
    expect(page.html).toMatch(/send-email<\/a><\/td><td class="n"><a href="[^"]*state=queued">2<\/a>/);
    expect(page.html).toContain('badge paused');
    expect(page.html).toContain('7 completed, 1 dead');
    expect((page.html.match(/<svg /g) ?? []).length).toBe(4);
    expect(page.html).toContain('7 completed, 0 dead</title>');
  });
});
