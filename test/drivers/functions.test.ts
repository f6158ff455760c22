import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaEnqueue, createLambdaReplay, createLambdaWorker } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelEnqueue, createVercelReplay, createVercelWorker } from '../../adapters/vercel.js';
import { DiscardError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { httpApiEvent, lambdaContext, scheduledEvent } from '../../testing/events.js';
import {
  databaseUrl,
  forgetNeonOptions,
  type TestContext,
  testDriver,
  testNeonEnv,
  useTestSchema,
} from '../helpers/db.js';
import { captureStatements } from '../helpers/statements.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The driver smoke set (test/drivers runs on every driver; test/functions on pg only): the Lambda
// and Vercel adapters' enqueue, worker and replay entry points, and the deployed app of this
// repository (functions/, api/), each connecting from its environment alone: SKIPLOCK_DRIVER set to
// the driver under test, and SKIPLOCK_NEON_WS_PROXY / SKIPLOCK_NEON_FETCH_ENDPOINT pointing Neon's
// drivers at the run's stand-ins (Neon's process-wide settings are put back to its defaults before
// each test, so nothing but the environment can point them there).
let t: TestContext;
useTestSchema('drivers_functions', (ctx) => {
  t = ctx;
});
const saved = { ...process.env };
beforeEach(() => forgetNeonOptions());
afterEach(async () => {
  await resetSharedRuntime();
  process.env = { ...saved };
});
afterAll(() => {
  process.env = saved;
});

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_MAX_DURATION_MS: '10000',
  ...testNeonEnv(),
  ...SECRETS,
  ...extra,
});
/** Runs `fn`, and checks that its claims went through the driver under test's client. */
async function throughTheDriver<T>(fn: () => Promise<T>): Promise<T> {
  const { result, sent } = await captureStatements(testDriver(), fn);
  expect(sent.filter((s) => s.driver === testDriver() && /\bready as\b/.test(s.text)).length).toBeGreaterThan(0);
  return result;
}
const rows = async () =>
  (
    await t.admin.query(
      `select id::text, state, attempt, replay_count, replayed_by from "${t.schema}".jobs order by id`,
    )
  ).rows;

// n = 0 completes, n = 1 fails (a retry a minute later), n = 2 is discarded until `fixed`.
let fixed = false;
const task = defineJob({
  kind: 'task',
  payload: z.object({ n: z.number() }),
  timeoutMs: 1_000,
  maxAttempts: 3,
  backoff: { type: 'constant', delayMs: 60_000 },
  handler: (p) => {
    if (p.n === 1) throw new Error('try again');
    if (p.n === 2 && !fixed) throw new DiscardError('bad input');
  },
});
const jobs = [0, 1, 2].map((n) => ({ kind: 'task', payload: { n }, options: { dedupe: { key: `k${n}` } } }));

/** After the first worker run and a replay of the dead job: what every entry point leaves behind. */
const afterReplay = (ids: string[], by: string) => [
  { id: ids[0], state: 'completed', attempt: 1, replay_count: 0, replayed_by: null },
  { id: ids[1], state: 'queued', attempt: 1, replay_count: 0, replayed_by: null },
  { id: ids[2], state: 'completed', attempt: 1, replay_count: 1, replayed_by: by },
];

describe(`the Lambda adapter (${testDriver()})`, () => {
  it('enqueue over the HTTP API, a scheduled worker that settles each outcome, a replay by invoke', async () => {
    fixed = false;
    const enqueue = createLambdaEnqueue([task], { env: env() });
    const bearer = { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` };
    const response = (await enqueue(httpApiEvent({ headers: bearer, body: JSON.stringify({ jobs }) }))) as {
      statusCode: number;
      body: string;
    };
    expect(response.statusCode).toBe(200);
    const results = JSON.parse(response.body).results as { id: string; outcome: string }[];
    expect(results.map((r) => r.outcome)).toEqual(['inserted', 'inserted', 'inserted']);
    const ids = results.map((r) => r.id);
    // Direct invoke, authorized by IAM: the same key is deduplicated.
    expect(await enqueue(jobs[0] as object)).toMatchObject({
      status: 200,
      results: [{ id: ids[0], outcome: 'deduplicated' }],
    });

    const worker = createLambdaWorker([task], { env: env() });
    expect(await throughTheDriver(() => worker(scheduledEvent(), lambdaContext(10_000)))).toMatchObject({
      claimed: 3,
      completed: 1,
      retried: 1,
      dead: 1,
      stoppedBecause: 'drained',
    });

    const replay = createLambdaReplay([task], { env: env() });
    expect(await replay({ ids: [ids[2]] }, lambdaContext(10_000, 'skiplock-replay'))).toMatchObject({
      status: 200,
      replayed: [{ id: ids[2] }],
      refused: [],
    });
    fixed = true;
    expect(await worker(scheduledEvent(), lambdaContext(10_000))).toMatchObject({ claimed: 1, completed: 1 });
    expect(await rows()).toEqual(afterReplay(ids, 'lambda:skiplock-replay'));
  });
});

describe(`the Vercel adapter (${testDriver()})`, () => {
  const request = (path: string, secret: keyof typeof SECRETS, body?: unknown) =>
    new Request(`https://app.example.com${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${SECRETS[secret]}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it('the enqueue route, the worker cron that settles each outcome, the replay route', async () => {
    fixed = false;
    const enqueued = await createVercelEnqueue([task], { env: env() })(
      request('/api/enqueue', 'SKIPLOCK_ENQUEUE_TOKEN', { jobs }),
    );
    expect(enqueued.status).toBe(200);
    const results = ((await enqueued.json()) as { results: { id: string; outcome: string }[] }).results;
    expect(results.map((r) => r.outcome)).toEqual(['inserted', 'inserted', 'inserted']);
    const ids = results.map((r) => r.id);

    const worker = createVercelWorker([task], { env: env() });
    const first = await throughTheDriver(() => worker(request('/api/worker', 'CRON_SECRET')));
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({
      claimed: 3,
      completed: 1,
      retried: 1,
      dead: 1,
      stoppedBecause: 'drained',
    });

    const replayed = await createVercelReplay([task], { env: env() })(
      request('/api/replay', 'SKIPLOCK_ADMIN_TOKEN', { ids: [ids[2]] }),
    );
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toMatchObject({ replayed: [{ id: ids[2] }], refused: [] });
    fixed = true;
    expect(await (await worker(request('/api/worker', 'CRON_SECRET'))).json()).toMatchObject({
      claimed: 1,
      completed: 1,
    });
    expect(await rows()).toEqual(afterReplay(ids, 'vercel:replay'));
  });
});

describe(`the deployed app, configured by its environment (${testDriver()})`, () => {
  // functions/jobs.ts: an e-mail with no EMAIL_API_URL is logged and completes; a webhook with no
  // WEBHOOK_SIGNING_SECRET is discarded (dead, config_error).
  const email = { to: 'ada@example.com', subject: 'Hi', template: 'welcome', idempotencyKey: 'e-1' };
  const webhook = { url: 'https://hooks.example.com/x', event: 'order.paid', deliveryId: 'd-1', data: {} };
  const appJobs = [
    { kind: 'send-email', payload: email },
    { kind: 'deliver-webhook', payload: webhook },
  ];
  const deploy = () => {
    process.env = { ...saved, ...env({ EMAIL_API_URL: undefined, WEBHOOK_SIGNING_SECRET: undefined }) };
  };
  const states = async () =>
    (await t.admin.query(`select kind, state, dead_reason from "${t.schema}".jobs order by id`)).rows;

  it('Lambda functions/enqueue.ts, functions/worker.ts and functions/replay.ts', async () => {
    deploy();
    const enqueue = await import('../../functions/enqueue.js');
    const worker = await import('../../functions/worker.js');
    const replay = await import('../../functions/replay.js');
    const response = (await enqueue.handler(
      httpApiEvent({
        headers: { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` },
        body: JSON.stringify({ jobs: appJobs }),
      }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(200);
    const [, hook] = (JSON.parse(response.body) as { results: { id: string }[] }).results;
    expect(await throughTheDriver(() => worker.handler(scheduledEvent(), lambdaContext(60_000)))).toMatchObject({
      claimed: 2,
      completed: 1,
      dead: 1,
    });
    expect(await states()).toEqual([
      { kind: 'send-email', state: 'completed', dead_reason: null },
      { kind: 'deliver-webhook', state: 'dead', dead_reason: 'config_error' },
    ]);
    expect(await replay.handler({ ids: [hook?.id] }, lambdaContext(10_000, 'skiplock-dev-replay'))).toMatchObject({
      status: 200,
      replayed: [{ id: hook?.id }],
    });
    expect((await states())[1]).toEqual({ kind: 'deliver-webhook', state: 'queued', dead_reason: null });
  });

  it('Vercel api/enqueue.ts, api/worker.ts and api/replay.ts', async () => {
    deploy();
    const enqueue = await import('../../api/enqueue.js');
    const worker = await import('../../api/worker.js');
    const replay = await import('../../api/replay.js');
    const post = (path: string, token: string, body: unknown) =>
      new Request(`https://app.example.com${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const enqueued = await enqueue.POST(post('/api/enqueue', SECRETS.SKIPLOCK_ENQUEUE_TOKEN, { jobs: appJobs }));
    expect(enqueued.status).toBe(200);
    const [, hook] = ((await enqueued.json()) as { results: { id: string }[] }).results;
    const ran = await throughTheDriver(() =>
      worker.GET(
        new Request('https://app.example.com/api/worker', {
          headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
        }),
      ),
    );
    expect(ran.status).toBe(200);
    expect(await ran.json()).toMatchObject({ claimed: 2, completed: 1, dead: 1 });
    const replayed = await replay.POST(post('/api/replay', SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [hook?.id] }));
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toMatchObject({ replayed: [{ id: hook?.id }] });
    expect(await states()).toEqual([
      { kind: 'send-email', state: 'completed', dead_reason: null },
      { kind: 'deliver-webhook', state: 'queued', dead_reason: null },
    ]);
  });
});
