import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelConsole } from '../../adapters/vercel.js';
import { setLimit } from '../../core/controls.js';
import { COOKIE, charge, serveRoute } from '../helpers/console.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

/**
 * The console in Debian's Chromium (playwright-core, no browser download): log in, filter the DLQ,
 * replay, and the refusals — an action without its CSRF token, an action after the session
 * expired. Each page's screenshot goes to SKIPLOCK_CONSOLE_SCREENSHOTS (docs/console for the
 * README: `npm run screenshots`), else to a temporary folder.
 */
const CHROMIUM = process.env.SKIPLOCK_CHROMIUM ?? '/usr/bin/chromium';
const shots =
  process.env.SKIPLOCK_CONSOLE_SCREENSHOTS ?? join(tmpdir(), `skiplock-console-${testDriver()}-${process.pid}`);

let t: TestContext;
useTestSchema('functions-console-browser', (ctx) => {
  t = ctx;
});

let now = new Date();
let browser: Browser;
let server: Server;
let origin: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  mkdirSync(shots, { recursive: true });
  const route = createVercelConsole([sendEmail, charge], {
    env: {
      DATABASE_URL: databaseUrl(),
      SKIPLOCK_DRIVER: testDriver(),
      SKIPLOCK_SCHEMA: t.schema,
      SKIPLOCK_LOG_LEVEL: 'error',
      SKIPLOCK_ADMIN_TOKEN: SECRETS.SKIPLOCK_ADMIN_TOKEN,
    },
    now: () => now,
  });
  ({ origin, server } = await serveRoute(route));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  server?.closeAllConnections();
  server?.close();
  await resetSharedRuntime();
});

const rows = async (sql: string, params: unknown[] = []) => (await t.admin.query(sql, params)).rows;
const stateOf = async (id: string) =>
  (await rows(`select state, replayed_by from "${t.schema}".jobs where id = $1`, [id]))[0];

/** A realistic day: completions and deaths spread over 24 hours, a DLQ of three kinds of failure, live jobs. */
async function seed(): Promise<{ dead: string[]; card: string }> {
  const s = `"${t.schema}"`;
  await t.admin.query(
    `insert into ${s}.jobs (kind, queue, payload, state, attempt, run_at, attempted_at, finished_at, dead_reason, last_error, errors)
     select case when g % 3 = 0 or g % 29 = 0 then 'charge-card' else 'send-email' end,
       case when g % 3 = 0 or g % 29 = 0 then 'billing' else 'emails' end, '{}'::jsonb,
       case when g % 29 = 0 then 'dead' else 'completed' end, 1, now() - g * interval '71 seconds',
       now() - g * interval '71 seconds', now() - g * interval '71 seconds',
       case when g % 29 = 0 then 'max_attempts' end,
       case when g % 29 = 0 then '{"class":"Error","message":"timeout"}'::jsonb end, '[]'::jsonb
     from generate_series(1, 1200) g`,
  );
  const live = await enqueuerFor(t.schema).enqueueMany(t.db, [
    sendEmail.with({ to: 'ada@example.com', subject: 'Welcome' }),
    sendEmail.with({ to: 'bob@example.com', subject: 'Receipt' }),
    sendEmail.with({ to: 'cy@example.com', subject: 'Reminder' }, { delayMs: 3_600_000 }),
    sendEmail.with({ to: 'dee@example.com', subject: 'Bounce' }),
    sendEmail.with({ to: 'eve@example.com', subject: 'Bounce' }),
    charge.with({ customer: 'cus_42', card: { number: '4242424242424242', last4: '4242' }, apiKey: 'sk_live_123' }),
  ]);
  const [dee, eve, card] = live.slice(3).map((r) => (r as { id: string }).id) as [string, string, string];
  await t.admin.query(
    `update ${s}.jobs set state = 'dead', dead_reason = 'max_attempts', attempt = 3, finished_at = now(),
       last_error = '{"class":"SmtpError","message":"550 mailbox unavailable"}',
       errors = '[{"class":"SmtpError","message":"421 try later","attempt":1,"at":"2026-11-23T09:00:00Z"},{"class":"SmtpError","message":"550 mailbox unavailable","attempt":3,"at":"2026-11-23T09:04:00Z"}]'
     where id = any($1::bigint[])`,
    [[dee, eve]],
  );
  await t.admin.query(
    `update ${s}.jobs set state = 'dead', dead_reason = 'http_4xx', attempt = 1, finished_at = now(),
       last_error = '{"class":"HttpError","message":"partner refused the charge"}',
       errors = '[{"class":"HttpError","message":"partner refused the charge","attempt":1,"at":"2026-11-23T09:10:00Z","responseStatus":422,"responseBody":"{\\"error\\":\\"card_declined\\"}","holder":"worker-7f3a"}]'
     where id = $1`,
    [card],
  );
  await t.admin.query(
    `insert into ${s}.pauses (scope, name, paused_at, paused_by, reason) values ('queue', 'billing', now(), 'console:ada', 'payment partner incident')`,
  );
  await t.admin.query(
    `insert into ${s}.destinations (name, state, opened_at, open_until, trips, window_start, window_calls, window_failures)
     values ('api.payments.example', 'open', now(), now() + interval '30 seconds', 2, now(), 20, 14)`,
  );
  await setLimit(t.db, { queue: 'emails' }, 8, { schema: t.schema, by: 'console:ada', reason: 'SMTP quota' });
  return { dead: [dee, eve], card };
}

async function shot(page: Page, name: string, fullPage = true) {
  const path = join(shots, `${name}.png`);
  await page.screenshot({ path, fullPage });
  const png = readFileSync(path);
  expect(png.subarray(1, 4).toString()).toBe('PNG');
  expect(png.length).toBeGreaterThan(10_000);
}

describe(`the console in Chromium (${testDriver()})`, () => {
  it('logs in, filters the DLQ, replays a job, and refuses an action without CSRF or after the session expired', async () => {
    now = new Date(Date.now() + 1_000);
    const { dead, card } = await seed();
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });

    await page.goto(`${origin}/admin`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    await shot(page, 'login');
    await page.fill('input[name=token]', 'not-the-admin-token');
    await page.click('button:has-text("Log in")');
    expect(await page.textContent('[role=alert]')).toContain('That token is not right.');
    await page.fill('input[name=token]', SECRETS.SKIPLOCK_ADMIN_TOKEN);
    await page.fill('input[name=name]', 'ada');
    await page.click('button:has-text("Log in")');
    await page.waitForSelector('h1:has-text("Overview")');
    const [cookie] = (await context.cookies()).filter((c) => c.name === COOKIE);
    expect(cookie).toMatchObject({ httpOnly: true, secure: true, sameSite: 'Strict', path: '/' });
    // The stylesheet ran under its nonce: the CSP lets it in and nothing else.
    expect(await page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")).toBe(
      'rgb(22, 32, 46)',
    );
    expect(await page.locator('svg').count()).toBe(4);
    expect(await page.textContent('main')).toContain('paused');
    await shot(page, 'overview');

    await page.click('header a:has-text("Dead letters")');
    await page.fill('input[name=kind]', 'send-email');
    await page.selectOption('select[name=since]', '1h');
    await page.click('button:has-text("Filter")');
    expect(new URL(page.url()).searchParams.get('kind')).toBe('send-email');
    const listed = await page.$$eval('tbody tr td:nth-child(2) a', (as) => as.map((a) => a.textContent));
    expect(listed.sort()).toEqual(dead.map((id) => `#${id}`).sort());
    expect(listed).not.toContain(`#${card}`);
    await shot(page, 'dlq');

    // Replay one of the two, through the confirmation.
    await page.check(`input[name=id][value="${dead[0]}"]`);
    await page.click('button:has-text("Replay selected")');
    await page.waitForSelector('h1:has-text("Confirm")');
    await shot(page, 'confirm');
    expect(await stateOf(dead[0] as string)).toMatchObject({ state: 'dead' });
    await page.click('button:has-text("Confirm")');
    expect(await page.textContent('[role=status]')).toContain('Replay: 1 of 1 job(s)');
    expect(await stateOf(dead[0] as string)).toMatchObject({ state: 'queued', replayed_by: 'console:ada' });

    // The form without its CSRF token (as a forged form would be): refused, nothing changed.
    await page.goto(`${origin}/admin/dlq?kind=send-email`);
    await page.check(`input[name=id][value="${dead[1]}"]`);
    await page.evaluate("for (const input of document.querySelectorAll('input[name=csrf]')) input.remove()");
    const refused = page.waitForResponse((r) => r.url().endsWith('/admin/actions'));
    await page.click('button:has-text("Replay selected")');
    expect((await refused).status()).toBe(403);
    expect(await page.textContent('[role=alert]')).toContain('nothing was changed');
    expect(await stateOf(dead[1] as string)).toMatchObject({ state: 'dead' });

    await page.goto(`${origin}/admin/jobs/${card}`);
    const body = (await page.textContent('main')) ?? '';
    expect(body).toContain('HTTP 422');
    expect(body).toContain('card_declined');
    expect(body).not.toContain('4242424242424242');
    expect(body).not.toContain('sk_live_123');
    await shot(page, 'job');
    await page.goto(`${origin}/admin/flow`);
    expect(await page.textContent('main')).toContain('api.payments.example');
    await shot(page, 'flow');
    await page.goto(`${origin}/admin/jobs?state=queued`);
    await shot(page, 'jobs', false);

    // Nine hours later the session (eight) has ended: the Replay button on the job page changes nothing.
    await page.goto(`${origin}/admin/jobs/${dead[1]}`);
    now = new Date(now.getTime() + 9 * 3_600_000);
    const expired = page.waitForResponse((r) => r.url().endsWith('/admin/actions'));
    await page.click('button:has-text("Replay")');
    expect((await expired).status()).toBe(401);
    expect(await page.textContent('[role=alert]')).toContain('nothing was changed');
    expect(await stateOf(dead[1] as string)).toMatchObject({ state: 'dead' });
    await page.goto(`${origin}/admin/`);
    expect(new URL(page.url()).pathname).toBe('/admin/login');
    expect(violations).toEqual([]);
    await context.close();
  });
});
