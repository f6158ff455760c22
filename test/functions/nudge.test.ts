// Nudges on Lambda, with the real AWS SDK: the enqueue function starts the worker function of
// the enqueued queues with an asynchronous Invoke, which a local Invoke endpoint runs as Lambda
// would. The cron tick stays the safety net.
import { afterEach, describe, expect, it } from 'vitest';
import { createLambdaEnqueue, createLambdaWorker, type LambdaContext } from '../../adapters/lambda.js';
import { NUDGE_EVENT } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { createNudger } from '../../core/nudge.js';
import type { InvocationSummary } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { httpApiEvent, scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { pingKind } from '../helpers/kinds.js';
import { startLambdaEndpoint, useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';

let t: TestContext;
useTestSchema('functions-nudge', (ctx) => {
  t = ctx;
});

const WORKER = 'skiplock-test-worker';
const TOKEN = 'enqueue-token-0123456789abcdef';
useLocalAwsCredentials();
afterEach(() => resetSharedRuntime());

const { ping, ran } = pingKind();
const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_ENQUEUE_TOKEN: TOKEN,
  SKIPLOCK_NUDGE_FUNCTIONS: `pings=${WORKER}`,
  ...extra,
});
const context: LambdaContext = { getRemainingTimeInMillis: () => 30_000, functionName: WORKER };
const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

describe(`nudges with asynchronous Lambda Invokes (${testDriver()})`, () => {
  it('a job enqueued over HTTP runs at once, with no cron tick: the enqueue function started the worker', async () => {
    ran.length = 0;
    const worker = createLambdaWorker([ping], { env: env() });
    const lambda = await startLambdaEndpoint({ [WORKER]: (event) => worker(event, context) });
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    try {
      const enqueue = createLambdaEnqueue([ping], { env: env() });
      const response = (await enqueue(
        httpApiEvent({
          headers: { authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify({ kind: 'ping', payload: { n: 1 } }),
        }),
      )) as { statusCode: number };
      expect(response.statusCode).toBe(200);
      await lambda.settled();
    } finally {
      await lambda.close();
    }
    expect(lambda.invokes).toEqual([{ functionName: WORKER, invocationType: 'Event', payload: NUDGE_EVENT }]);
    expect(ran).toEqual([1]);
    expect(await states()).toEqual([{ state: 'completed', n: 1 }]);
  });

  it('200 enqueues at once start one worker, and one more when the coalescing window ends', async () => {
    const clock = new ManualClock();
    const lambda = await startLambdaEndpoint(); // records, runs nothing
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    try {
      const enqueue = createLambdaEnqueue([ping], { env: env(), clock });
      const results = await Promise.all(
        Array.from({ length: 200 }, (_, n) => enqueue({ kind: 'ping', payload: { n } })),
      );
      for (const result of results) expect(result).toMatchObject({ status: 200 });
      expect(lambda.invokes).toHaveLength(1);
      clock.advance(1_000); // the window ends: one start for what came meanwhile
      await lambda.invoked(2);
      expect(lambda.invokes).toHaveLength(2);
    } finally {
      await lambda.close();
    }
    expect(await states()).toEqual([{ state: 'queued', n: 200 }]);
  });

  it('the nudge target is down: every enqueue still succeeds, and the next cron tick runs the jobs', async () => {
    ran.length = 0;
    const lambda = await startLambdaEndpoint();
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    await lambda.close(); // nothing listens there any more
    const enqueue = createLambdaEnqueue([ping], { env: env() });
    for (const n of [1, 2, 3]) {
      expect(await enqueue({ kind: 'ping', payload: { n } })).toMatchObject({
        status: 200,
        results: [{ outcome: 'inserted' }],
      });
    }
    const tick = (await createLambdaWorker([ping], { env: env() })(scheduledEvent(), context)) as InvocationSummary;
    expect(tick).toMatchObject({ claimed: 3, completed: 3 });
    expect(ran.sort()).toEqual([1, 2, 3]);
  });

  it('the shared helper: nudge: true outside a transaction, nudge(queues) after one; without a nudger it refuses before writing', async () => {
    const started: string[] = [];
    const nudger = createNudger({
      coalesceMs: 0,
      workerFor: (queue) => (queue === 'pings' ? { start: async () => void started.push(queue) } : undefined),
    });
    const q = createEnqueuer({ schema: t.schema, nudger });
    await q.enqueue(t.db, ping, { n: 1 }, { nudge: true });
    expect(started).toEqual(['pings']);
    await q.enqueue(t.db, ping, { n: 2 }); // no nudge asked
    expect(started).toEqual(['pings']);
    await q.nudge([ping.queue, 'unknown-queue']);
    expect(started).toEqual(['pings', 'pings']);
    await expect(createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 3 }, { nudge: true })).rejects.toThrow(
      'nudge: true needs a nudger',
    );
    expect(await states()).toEqual([{ state: 'queued', n: 2 }]);
  });
});

describe(`a nudge that fails (${testDriver()})`, () => {
  it("logs nudge_failed with the SDK's error and its cause, not only its name", async () => {
    process.env.AWS_ENDPOINT_URL_LAMBDA = 'http://127.0.0.1:9'; // nothing listens: refused at once
    const lines: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      const enqueue = createLambdaEnqueue([ping], { env: env({ SKIPLOCK_LOG_LEVEL: 'warn' }) });
      const response = (await enqueue(
        httpApiEvent({
          headers: { authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify({ kind: 'ping', payload: { n: 8 } }),
        }),
      )) as { statusCode: number };
      expect(response.statusCode).toBe(200);
    } finally {
      process.stdout.write = write;
    }
    const failed = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'nudge_failed');
    expect(failed).toHaveLength(1);
    expect(failed[0].error).toMatch(/asynchronous invokes of skiplock-test-worker failed: .*ECONNREFUSED/);
  });
});
