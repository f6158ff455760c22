import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { bundleWorker, type PlatformBundle } from '../../scripts/platforms/bundle.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import {
  PLATFORM_SECRETS,
  WORKERS_FREE_PLAN_GZIP_LIMIT,
  workerdChecks,
  workerdRequests,
} from '../helpers/platforms.js';

// skiplock/cloudflare inside workerd (Miniflare) on the drivers with sockets: node-postgres over
// cloudflare:sockets straight to the local Postgres, the same through Miniflare's local Hyperdrive,
// and Neon's WebSocket Pool through the local stand-in of Neon's proxy. Workers tie a socket to the
// request that opened it, so each request opens its pool and closes it when its work is done.
let t: TestContext;
useTestSchema('platform-cloudflare-sockets', (ctx) => {
  t = ctx;
});

const NAME = 'skiplock-sockets';
let bundle: PlatformBundle;

/** Hyperdrive's binding wants a password; the local Postgres trusts its users and ignores it. */
const withPassword = (url: string) => {
  const parsed = new URL(url);
  parsed.password ||= 'unused';
  return parsed.href;
};

interface Combination {
  name: string;
  bindings: () => Record<string, string>;
  hyperdrives?: () => Record<string, string>;
}
const COMBINATIONS: Combination[] = [
  {
    name: 'pg over cloudflare:sockets',
    bindings: () => ({ SKIPLOCK_DRIVER: 'pg', DATABASE_URL: databaseUrl() }),
  },
  {
    name: 'pg through a Hyperdrive binding',
    // No DATABASE_URL, no SKIPLOCK_DRIVER: the binding gives the connection string, and pg.
    bindings: () => ({}),
    hyperdrives: () => ({ HYPERDRIVE: withPassword(databaseUrl()) }),
  },
  {
    name: 'neon-ws',
    bindings: () => ({
      SKIPLOCK_DRIVER: 'neon-ws',
      DATABASE_URL: databaseUrl(),
      SKIPLOCK_NEON_WS_PROXY: `127.0.0.1:${inject('neonWsProxyPort')}/v1`,
    }),
  },
];

beforeAll(async () => {
  bundle = await bundleWorker('test/fixtures/platforms/wrangler.sockets.jsonc');
  await t.admin.query(
    `create table if not exists "${t.schema}".platform_orders (id serial primary key, n int not null)`,
  );
}, 120_000);

it('bundles every driver within Workers’ size limit', () => {
  expect(bundle.gzipBytes).toBeLessThan(WORKERS_FREE_PLAN_GZIP_LIMIT);
});

describe.each(COMBINATIONS)('skiplock/cloudflare on $name in workerd (Miniflare)', (combination) => {
  let mf: Miniflare;
  const checks = workerdChecks(
    workerdRequests(() => mf),
    () => t,
  );

  beforeAll(async () => {
    mf = new Miniflare({
      name: NAME,
      modules: true,
      script: bundle.code,
      compatibilityDate: '2025-09-01',
      compatibilityFlags: ['nodejs_compat'],
      bindings: {
        SKIPLOCK_SCHEMA: t.schema,
        SKIPLOCK_LOG_LEVEL: 'error',
        SKIPLOCK_NUDGE_ROUTES: '*=/skiplock/worker',
        ...PLATFORM_SECRETS,
        ...combination.bindings(),
      },
      hyperdrives: combination.hyperdrives?.(),
      serviceBindings: { SKIPLOCK_SELF: NAME },
    });
    await mf.ready;
  }, 60_000);

  afterAll(async () => {
    await mf?.dispose();
  });

  it('a job enqueued in the app’s own transaction runs on a Cron Trigger, and a second tick on the same isolate runs too', async () => {
    const worker = await checks.placedOrderRunsOnCronTrigger();
    // A second tick: a pool kept from the first request would hang it (workerd cancels it as hung).
    await expect(worker.scheduled({ cron: '* * * * *' })).resolves.toMatchObject({ outcome: 'ok' });
  });

  it('a failed transaction writes neither the order nor its job', async () => {
    await checks.failedOrderWritesNothing();
  });

  it('an enqueue through the route nudges the worker through the service binding: it runs at once', async () => {
    await checks.nudgedEnqueueRunsAtOnce();
  });

  it('a dead job is replayed through the replay route and runs again (nudged)', async () => {
    await checks.replayedJobRunsAgain();
  });
});
