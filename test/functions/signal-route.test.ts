import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createLambdaSignal,
  createLambdaWorker,
  type HttpApiResult,
  type LambdaContext,
} from '../../adapters/lambda.js';
import { NUDGE_EVENT } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelSignal } from '../../adapters/vercel.js';
import { getJob } from '../../core/admin.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createSignalToken } from '../../core/signal-tokens.js';
import { createWorker } from '../../core/worker/index.js';
import { httpApiEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { startLambdaEndpoint, useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';

// The signal route on both platforms: a job waits for a signal, an outside caller holding a callback
// token (no bearer token of ours) sends it once; every refusal is a clear error that sends nothing.
let t: TestContext;
useTestSchema('functions-signal-route', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());
useLocalAwsCredentials();

const SECRET = 'signal-secret-0123456789abcdef-0123456789';
const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_SIGNAL_SECRET: SECRET,
  ...extra,
});

type Reply = { status: number; body: Record<string, unknown> };
/** POST a body to the signal route of `platform` with `?token=`, as the platform would deliver it. */
async function post(
  platform: 'vercel' | 'lambda',
  token: string | undefined,
  body: string | undefined,
  e = env(),
): Promise<Reply> {
  const headers = { 'content-type': 'application/json' };
  if (platform === 'vercel') {
    const url = `https://app.example.com/api/signal${token === undefined ? '' : `?token=${encodeURIComponent(token)}`}`;
    const response = await createVercelSignal({ env: e })(new Request(url, { method: 'POST', headers, body }));
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }
  const event = httpApiEvent({ body, ...(token === undefined ? {} : { query: { token } }) });
  const result = (await createLambdaSignal({ env: e })(event)) as HttpApiResult;
  return { status: result.statusCode, body: JSON.parse(result.body) as Record<string, unknown> };
}

const approval = defineJob({
  kind: 'approval',
  payload: z.object({ order: z.string() }),
  handler: async (p, ctx) => {
    const got = await ctx.waitForSignal<{ approved: boolean }>('approved', {
      key: `approve:${p.order}`,
      timeoutMs: 86_400_000,
    });
    return got.timedOut ? 'timed out' : got.payload.approved;
  },
});
const run = () =>
  createWorker({ db: t.db, schema: t.schema, jobs: [approval], logger: silentLogger }).runInvocation({
    remainingMs: 60_000,
  });

describe.each(['vercel', 'lambda'] as const)('the signal route (%s)', (platform) => {
  it('a callback with a valid token wakes the waiting job with its body; the same token again is refused', async () => {
    const { id } = await enqueuerFor(t.schema).enqueue(t.db, approval, { order: `o-${platform}` });
    expect(await run()).toMatchObject({ suspended: 1 });
    const token = createSignalToken(SECRET, `approve:o-${platform}`);
    const first = await post(platform, token, JSON.stringify({ approved: true }));
    expect(first).toMatchObject({ status: 200, body: { signal: { woken: 1 } } });
    expect(await post(platform, token, JSON.stringify({ approved: false }))).toEqual({
      status: 409,
      body: { error: { code: 'signal_token_used', message: 'the signal token was already used' } },
    });
    expect(await run()).toMatchObject({ completed: 1 });
    expect(await getJob(t.db, id, { schema: t.schema })).toMatchObject({ state: 'completed', result: true });
    const signals = await t.admin.query(`select count(*)::int as n from "${t.schema}".signals`);
    expect(signals.rows[0].n).toBe(1);
  });

  it('refuses a forged, expired or missing token, a bad body, and works only with a secret set; nothing is sent', async () => {
    const token = createSignalToken(SECRET, 'approve:x');
    const [body, signature] = token.split('.') as [string, string];
    const forged = `${Buffer.from(JSON.stringify({ k: 'approve:y', e: Date.now() + 60_000, i: 'x' })).toString('base64url')}.${signature}`;
    const expired = createSignalToken(SECRET, 'approve:x', { expiresInMs: 1_000, now: new Date(Date.now() - 60_000) });
    const cases: [string | undefined, string | undefined, number, string, ReturnType<typeof env>?][] = [
      [forged, '{}', 401, 'invalid_signal_token'],
      [`${body}.${signature.slice(1)}x`, '{}', 401, 'invalid_signal_token'],
      [undefined, '{}', 401, 'invalid_signal_token'],
      [expired, '{}', 410, 'signal_token_expired'],
      [token, '{"approved":', 400, 'malformed_json'],
      [
        token,
        JSON.stringify({ blob: 'x'.repeat(2_000) }),
        413,
        'body_too_large',
        env({ SKIPLOCK_MAX_BODY_BYTES: '1024' }),
      ],
      [token, '{}', 401, 'unauthorized', env({ SKIPLOCK_SIGNAL_SECRET: undefined })],
      [token, '{}', 401, 'unauthorized', env({ SKIPLOCK_SIGNAL_SECRET: 'too-short' })],
    ];
    for (const [presented, sent, status, code, e] of cases) {
      const reply = await post(platform, presented, sent, e);
      expect({ status: reply.status, code: (reply.body.error as { code: string }).code }).toEqual({ status, code });
      expect(JSON.stringify(reply.body)).not.toMatch(/at .*\.ts|postgres:\/\/|signal-secret/);
      await resetSharedRuntime();
    }
    const signals = await t.admin.query(`select count(*)::int as n from "${t.schema}".signals`);
    expect(signals.rows[0].n).toBe(0);
  });

  it('says whether its secret is unset or too short', async () => {
    const token = createSignalToken(SECRET, 'approve:x');
    const unset = await post(platform, token, '{}', env({ SKIPLOCK_SIGNAL_SECRET: undefined }));
    expect(unset.body.error).toEqual({
      code: 'unauthorized',
      message: 'this endpoint is disabled until SKIPLOCK_SIGNAL_SECRET is set to at least 32 characters',
    });
    await resetSharedRuntime();
    const short = await post(platform, token, '{}', env({ SKIPLOCK_SIGNAL_SECRET: 'too-short' }));
    expect(short.body.error).toEqual({
      code: 'unauthorized',
      message: 'this endpoint is disabled: SKIPLOCK_SIGNAL_SECRET is shorter than 32 characters',
    });
    await resetSharedRuntime();
  });
});

describe(`a signal that woke a job starts its worker (${testDriver()})`, () => {
  it("Lambda: the signal function invokes the worker of the job's queue (SKIPLOCK_NUDGE_FUNCTIONS), which runs it at once", async () => {
    const WORKER = 'skiplock-test-approvals';
    const e = env({ SKIPLOCK_NUDGE_FUNCTIONS: `default=${WORKER}` });
    const { id } = await enqueuerFor(t.schema).enqueue(t.db, approval, { order: 'o-nudged' });
    expect(await run()).toMatchObject({ suspended: 1 });
    const worker = createLambdaWorker([approval], { env: e });
    // Time for the kind's default timeout (60 s) and the lease's grace.
    const context: LambdaContext = { getRemainingTimeInMillis: () => 300_000, functionName: WORKER };
    const lambda = await startLambdaEndpoint({ [WORKER]: (event) => worker(event, context) });
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    try {
      const event = httpApiEvent({
        body: JSON.stringify({ approved: true }),
        query: { token: createSignalToken(SECRET, 'approve:o-nudged') },
      });
      const result = (await createLambdaSignal({ env: e })(event)) as HttpApiResult;
      expect(result.statusCode).toBe(200);
      expect(JSON.parse(result.body)).toMatchObject({ signal: { woken: 1, queues: ['default'] } });
      await lambda.settled();
    } finally {
      await lambda.close();
      delete process.env.AWS_ENDPOINT_URL_LAMBDA;
    }
    // No invocation of ours after the signal: the nudged worker ran the job.
    expect(lambda.invokes).toEqual([{ functionName: WORKER, invocationType: 'Event', payload: NUDGE_EVENT }]);
    expect(await getJob(t.db, id, { schema: t.schema })).toMatchObject({ state: 'completed', result: true });
  });

  it('Vercel: the signal route nudges the woken queue; a signal that wakes nobody nudges nothing', async () => {
    const nudged: string[][] = [];
    const nudger = { nudge: async (queues: Iterable<string>) => void nudged.push([...queues]) };
    await enqueuerFor(t.schema).enqueue(t.db, approval, { order: 'o-vercel-nudge' });
    expect(await run()).toMatchObject({ suspended: 1 });
    const send = async (key: string) => {
      const url = `https://app.example.com/api/signal?token=${encodeURIComponent(createSignalToken(SECRET, key))}`;
      const response = await createVercelSignal({ env: env(), nudger })(
        new Request(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"approved":true}',
        }),
      );
      return (await response.json()) as { signal: { woken: number } };
    };
    expect(await send('approve:nobody-waits')).toMatchObject({ signal: { woken: 0 } });
    expect(nudged).toEqual([]);
    expect(await send('approve:o-vercel-nudge')).toMatchObject({ signal: { woken: 1 } });
    expect(nudged).toEqual([['default']]);
  });

  it('signal(…, { nudge: true }) nudges the queues of the jobs it woke, and needs a nudger', async () => {
    const nudged: string[][] = [];
    const nudger = { nudge: async (queues: Iterable<string>) => void nudged.push([...queues]) };
    const { id } = await enqueuerFor(t.schema).enqueue(t.db, approval, { order: 'o-lib' });
    expect(await run()).toMatchObject({ suspended: 1 });
    await expect(
      enqueuerFor(t.schema).signal(t.db, 'approve:o-lib', { approved: true }, { nudge: true }),
    ).rejects.toThrow('nudge: true needs a nudger');
    const enqueuer = createEnqueuer({ schema: t.schema, nudger });
    expect(await enqueuer.signal(t.db, 'approve:o-lib', { approved: true }, { nudge: true })).toMatchObject({
      woken: 1,
      queues: ['default'],
    });
    expect(nudged).toEqual([['default']]);
    expect(await run()).toMatchObject({ completed: 1 });
    expect(await getJob(t.db, id, { schema: t.schema })).toMatchObject({ state: 'completed', result: true });
  });
});
