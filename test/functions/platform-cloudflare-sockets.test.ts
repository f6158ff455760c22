import { Miniflare } from 'miniflare';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { bundleWorker, type PlatformBundle } from '../../scripts/platforms/bundle.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import {
  PLATFORM_SECRETS,
  WORKERS_FREE_PLAN_GZIP_LIMIT,
  type WorkerdApp,
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

let bundle: PlatformBundle;
/** One workerd for the three Workers (one per combination): each starts in seconds. */
let mf: Miniflare;

/** Hyperdrive's binding wants a password; the local Postgres trusts its users and ignores it. */
const withPassword = (url: string) => {
  const parsed = new URL(url);
  parsed.password ||= 'unused';
  return parsed.href;
};

interface Combination {
  name: string;
  /** The Worker's name in Miniflare (its SKIPLOCK_SELF binding points at itself). */
  worker: string;
  bindings: () => Record<string, string>;
  hyperdrives?: () => Record<string, string>;
}
const COMBINATIONS: Combination[] = [
  {
    name: 'pg over cloudflare:sockets',
    worker: 'skiplock-pg',
    bindings: () => ({ SKIPLOCK_DRIVER: 'pg', DATABASE_URL: databaseUrl() }),
  },
  {
    name: 'pg through a Hyperdrive binding',
    worker: 'skiplock-hyperdrive',
    // No DATABASE_URL, no SKIPLOCK_DRIVER: the binding gives the connection string, and pg.
    bindings: () => ({}),
    hyperdrives: () => ({ HYPERDRIVE: withPassword(databaseUrl()) }),
  },
  {
    name: 'neon-ws',
    worker: 'skiplock-neon-ws',
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
  mf = new Miniflare({
    workers: COMBINATIONS.map((combination) => ({
      name: combination.worker,
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
      serviceBindings: { SKIPLOCK_SELF: combination.worker },
    })),
  });
  await mf.ready;
}, 120_000);

afterAll(async () => {
  await mf?.dispose();
});

it('bundles every driver within Workers’ size limit', () => {
  expect(bundle.gzipBytes).toBeLessThan(WORKERS_FREE_PLAN_GZIP_LIMIT);
});

describe.each(COMBINATIONS)('skiplock/cloudflare on $name in workerd (Miniflare)', (combination) => {
  const worker = () => mf.getWorker(combination.worker);
  const checks = workerdChecks(
    workerdRequests(() => ({
      // A named Worker's Fetcher: fetch as dispatchFetch does, and scheduled.
      dispatchFetch: async (url, init) =>
        ((await worker()) as unknown as { fetch: WorkerdApp['dispatchFetch'] }).fetch(url, init),
      getWorker: worker,
    })),
    () => t,
  );

  it('a job enqueued in the app’s own transaction runs on a Cron Trigger, and a second tick on the same isolate runs too', async () => {
    const entries = await checks.placedOrderRunsOnCronTrigger();
    // A second tick: a pool kept from the first request would hang it (workerd cancels it as hung).
    await expect(entries.scheduled({ cron: '* * * * *' })).resolves.toMatchObject({ outcome: 'ok' });
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
