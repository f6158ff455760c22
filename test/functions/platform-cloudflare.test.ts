import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createCloudflareWorker } from '../../adapters/cloudflare.js';
import { ConfigError } from '../../base/errors.js';
import { createSignalToken } from '../../core/signal-tokens.js';
import { bundleWorker, type PlatformBundle } from '../../scripts/platforms/bundle.js';
import { platformJobs } from '../fixtures/platforms/jobs.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import {
  PLATFORM_SECRETS,
  settledJob,
  WORKERS_FREE_PLAN_GZIP_LIMIT,
  waitForOutcome,
  workerdChecks,
  workerdRequests,
} from '../helpers/platforms.js';

// skiplock/cloudflare inside workerd (Miniflare, from npm), against the local Postgres through the
// local stand-in of Neon's HTTP API: the Worker reaches Postgres by fetch only, as on Cloudflare.
let t: TestContext;
useTestSchema('platform-cloudflare', (ctx) => {
  t = ctx;
});

const NAME = 'skiplock-app';
let bundle: PlatformBundle;
let mf: Miniflare;

const bindings = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_NEON_FETCH_ENDPOINT: inject('neonHttpUrl'),
  SKIPLOCK_NUDGE_ROUTES: '*=/skiplock/worker',
  ...PLATFORM_SECRETS,
  ...extra,
});

function start(extra: Record<string, string> = {}, stderr?: (text: string) => void) {
  return new Miniflare({
    handleRuntimeStdio: stderr
      ? (_out: NodeJS.ReadableStream, err: NodeJS.ReadableStream) => {
          err.on('data', (chunk: Buffer) => stderr(chunk.toString()));
        }
      : undefined,
    name: NAME,
    modules: true,
    script: bundle.code,
    compatibilityDate: '2025-09-01',
    compatibilityFlags: ['nodejs_compat'],
    bindings: bindings(extra),
    // The Worker's own service binding: how nudges reach its worker route.
    serviceBindings: { SKIPLOCK_SELF: NAME },
  });
}

beforeAll(async () => {
  bundle = await bundleWorker('test/fixtures/platforms/wrangler.jsonc');
  await t.admin.query(
    `create table if not exists "${t.schema}".platform_orders (id serial primary key, n int not null)`,
  );
  mf = start();
  await mf.ready;
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
});

const requests = workerdRequests(() => mf);
const { post, enqueue, scheduler } = requests;
const settled = (id: string) => settledJob(t.admin, t.schema, id);
const checks = workerdChecks(requests, () => t);

describe('skiplock/cloudflare in workerd (Miniflare)', () => {
  it('bundles within Workers’ size limit', () => {
    expect(bundle.gzipBytes).toBeLessThan(WORKERS_FREE_PLAN_GZIP_LIMIT);
  });

  it('a job enqueued in the app’s transaction (a neon-http batch) runs on a Cron Trigger', async () => {
    await checks.placedOrderRunsOnCronTrigger();
  });

  it('a failed batch writes neither the order nor its job', async () => {
    await checks.failedOrderWritesNothing();
  });

  it('an enqueue through the route nudges the worker through the service binding: it runs at once', async () => {
    await checks.nudgedEnqueueRunsAtOnce();
  });

  it('the app’s own route starts the worker with skiplock.nudge after its batch: it runs at once', async () => {
    await checks.placedOrderNudgedRunsAtOnce();
  });

  it('a dead job is replayed through the replay route and runs again (nudged)', async () => {
    await checks.replayedJobRunsAgain();
  });

  it('a signal through the signal route wakes a waiting job, which completes', async () => {
    const id = await enqueue('platform-approval', { order: 'cf-1' });
    await waitForOutcome(
      async () =>
        (await t.admin.query(`select count(*)::int as n from "${t.schema}".job_steps where job_id = $1`, [id])).rows[0]
          .n as number,
      (n) => n > 0,
    );
    const token = createSignalToken(PLATFORM_SECRETS.SKIPLOCK_SIGNAL_SECRET, 'approve:cf-1');
    const signal = await post(`/skiplock/signal?token=${encodeURIComponent(token)}`, undefined, { approved: true });
    expect(signal.status).toBe(200);
    expect(await settled(id)).toMatchObject({ state: 'completed', result: { approved: true } });
  });

  it('the console logs in with the admin token, counted by the client address Cloudflare sets', async () => {
    const form = new URLSearchParams({ token: PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN, name: 'ada', next: '/admin/' });
    const login = await mf.dispatchFetch('http://localhost/admin/login', {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'cf-connecting-ip': '203.0.113.7',
      },
      body: form.toString(),
    });
    expect(login.status, await login.clone().text()).toBe(303);
    const cookie = login.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(/HttpOnly/i);
    const page = await mf.dispatchFetch('http://localhost/admin/', { headers: { cookie: cookie.split(';')[0] ?? '' } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Error rate per minute'); // the overview, logged in
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".console_sessions`);
    expect(rows[0].n).toBe(1);
    // A wrong token is counted under the address Cloudflare's edge set, not one the client sent.
    const wrong = await mf.dispatchFetch('http://localhost/admin/login', {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'cf-connecting-ip': '203.0.113.9',
        'x-forwarded-for': '198.51.100.1',
      },
      body: new URLSearchParams({ token: 'not-the-token-0123456789abcdef', name: 'eve', next: '/admin/' }).toString(),
    });
    expect(wrong.status).toBe(401);
    const logins = await t.admin.query(`select client from "${t.schema}".console_logins`);
    const clients = logins.rows.map((r) => r.client as string);
    expect(clients).toContain('ip:203.0.113.9');
    expect(clients).not.toContain('ip:198.51.100.1');
  });

  it('maintenance runs on its own Cron Trigger', async () => {
    const worker = await scheduler();
    // A failed tick throws (a failed Cron Trigger); this one answers.
    await expect(worker.scheduled({ cron: '*/5 * * * *' })).resolves.toMatchObject({ outcome: 'ok' });
  });

  it.each(['pg', 'neon-ws'])(
    'SKIPLOCK_DRIVER=%s is refused as a Worker bundled for neon-http alone loads, before any statement',
    async (driver) => {
      const message = new RegExp(`SKIPLOCK_DRIVER=${driver} .*bundled for neon-http alone`);
      let log = '';
      const refused = start({ SKIPLOCK_DRIVER: driver }, (text) => {
        log += text;
      });
      try {
        await expect(refused.ready).rejects.toThrow(/failed to start/);
        expect(log).toMatch(message);
      } finally {
        await refused.dispose().catch(() => {});
      }
    },
  );
});

describe('createCloudflareWorker (configuration)', () => {
  it('refuses a CPU limit too small to run a worker (the Free plan’s 10 ms)', () => {
    expect(() => createCloudflareWorker(platformJobs, { cpuMs: 10 })).toThrow(ConfigError);
  });

  it('refuses a kind whose timeout cannot fit the 30 s a started run gets', () => {
    const env = { DATABASE_URL: 'postgres://x/y', SKIPLOCK_DRIVER: 'neon-http' };
    const slow = { ...platformJobs[0], kind: 'slow', timeoutMs: 60_000 } as (typeof platformJobs)[number];
    const saved = process.env.DATABASE_URL;
    process.env.DATABASE_URL = env.DATABASE_URL;
    try {
      expect(() => createCloudflareWorker([slow], { cpuMs: 300_000 })).toThrow(/slow/);
    } finally {
      if (saved === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = saved;
    }
  });
});
