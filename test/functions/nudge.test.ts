// Nudges on Lambda, with the real AWS SDK: the enqueue function starts the worker function of
// the enqueued queues with an asynchronous Invoke, which a local Invoke endpoint runs as Lambda
// would. The cron tick stays the safety net.
import { afterEach, describe, expect, it } from 'vitest';
import { createLambdaEnqueue, createLambdaWorker, type LambdaContext } from '../../adapters/lambda.js';
import { NUDGE_EVENT } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { createNudger } from '../../core/nudge.js';
import type { InvocationSummary } from '../../core/worker.js';
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

describe(`a nudge target that accepts connections and never answers (${testDriver()})`, () => {
  it('the enqueue is answered within the nudge bound, its job committed; the failure is logged with its cause', async () => {
    // Accepts every connection, reads, never answers: a stuck or cold target.
    const sockets = new Set<import('node:net').Socket>();
    const server = (await import('node:net')).createServer((socket) => {
      sockets.add(socket);
      socket.on('data', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as import('node:net').AddressInfo;
    process.env.AWS_ENDPOINT_URL_LAMBDA = `http://127.0.0.1:${port}`;
    const lines: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    try {
      const enqueue = createLambdaEnqueue([ping], { env: env({ SKIPLOCK_LOG_LEVEL: 'warn' }) });
      const started = Date.now();
      const response = (await enqueue(
        httpApiEvent({
          headers: { authorization: `Bearer ${TOKEN}` },
          body: JSON.stringify({ kind: 'ping', payload: { n: 7 } }),
        }),
      )) as { statusCode: number };
      const tookMs = Date.now() - started;
      expect(response.statusCode).toBe(200);
      // Well inside the enqueue function's own 10 s timeout (serverless.yml): the nudge's bound is 2 s.
      expect(tookMs).toBeLessThan(4_000);
    } finally {
      process.stdout.write = write;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    const failed = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'nudge_failed');
    expect(failed).toHaveLength(1);
    expect(failed[0].error).toMatch(/did not answer within 2000 ms/);
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

describe(`the library's enqueue with a nudge target that never answers (${testDriver()})`, () => {
  it('enqueue(..., { nudge: true }) answers once the 2 s bound passes on the nudger clock, its job committed', async () => {
    const clock = new ManualClock();
    const lines: string[] = [];
    const logger = {
      debug() {},
      info() {},
      error() {},
      warn: (msg: string, fields?: Record<string, unknown>) => void lines.push(`${msg} ${JSON.stringify(fields)}`),
    };
    // A start that is accepted and never answered (a stuck or cold target).
    const stuck = { start: () => new Promise<void>(() => {}) };
    const nudger = createNudger({ workerFor: () => stuck, clock, logger });
    const enqueuer = createEnqueuer({ schema: t.schema, nudger });
    let answered = false;
    const enqueued = enqueuer.enqueue(t.db, ping, { n: 9 }, { nudge: true }).then((r) => {
      answered = true;
      return r;
    });
    // Committed before the nudge: the row is there while the enqueue waits for its start.
    for (let i = 0; i < 50 && (await states()).length === 0; i++) await new Promise((r) => setImmediate(r));
    expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    expect(answered).toBe(false);
    clock.advance(2_000);
    expect(await enqueued).toMatchObject({ outcome: 'inserted' });
    expect(lines).toEqual([expect.stringMatching(/^nudge_failed .*did not answer within 2000 ms/)]);
  });
});
