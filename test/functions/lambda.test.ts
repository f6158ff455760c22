import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createLambdaEnqueue,
  createLambdaMaintenance,
  createLambdaReplay,
  createLambdaWorker,
} from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { defineJob } from '../../core/jobs.js';
import { claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { ManualClock } from '../../testing/clock.js';
import { httpApiEvent, lambdaContext, scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { sendEmail, syncProfile } from '../helpers/kinds.js';
import { captureStdout } from '../helpers/stdout.js';

let t: TestContext;
const TOKEN = 'enqueue-token-0123456789abcdef';

useTestSchema('functions-lambda', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_ENQUEUE_TOKEN: TOKEN,
  SKIPLOCK_LOG_LEVEL: 'error',
  ...extra,
});
const count = async () =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0].n as number;
const email = { to: 'ada@example.com', subject: 'Welcome', body: 'hi' };
const bearer = { authorization: `Bearer ${TOKEN}` };

describe(`Lambda enqueue over HTTP API (${testDriver()})`, () => {
  const handler = () => createLambdaEnqueue([sendEmail, syncProfile], { env: env() });

  it('enqueues one job with the right token and answers 200 with its id', async () => {
    const response = (await handler()(
      httpApiEvent({
        headers: bearer,
        body: JSON.stringify({ kind: 'send-email', payload: email, options: { dedupe: { key: 'w-1' } } }),
      }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(200);
    const body = JSON.parse(response.body);
    expect(body.results).toEqual([{ id: expect.any(String), outcome: 'inserted' }]);
    const again = (await handler()(
      httpApiEvent({
        headers: bearer,
        body: JSON.stringify({ kind: 'send-email', payload: email, options: { dedupe: { key: 'w-1' } } }),
      }),
    )) as { body: string };
    expect(JSON.parse(again.body).results).toEqual([{ id: body.results[0].id, outcome: 'deduplicated' }]);
    expect(await count()).toBe(1);
  });

  it('enqueues a batch, base64 bodies included', async () => {
    const jobs = [
      { kind: 'send-email', payload: email },
      { kind: 'sync-profile', payload: { userId: 1, name: 'a' }, options: { delayMs: 1000, priority: 3 } },
    ];
    const response = (await handler()(
      httpApiEvent({ headers: bearer, body: JSON.stringify({ jobs }), base64: true }),
    )) as {
      statusCode: number;
      body: string;
    };
    expect(response.statusCode).toBe(200);
    expect(JSON.parse(response.body).results).toHaveLength(2);
    expect(await count()).toBe(2);
  });

  it.each([
    ['malformed JSON', { body: '{"kind": "send-email",' }, 400, /not valid JSON/],
    [
      'wrong content type',
      { body: '{}', headers: { 'content-type': 'text/plain' } },
      400,
      /content-type must be application\/json/,
    ],
    ['empty body', { body: '' }, 400, /body is empty/],
    ['unknown kind', { body: JSON.stringify({ kind: 'send-fax', payload: {} }) }, 400, /unknown job kind "send-fax"/],
    [
      'invalid payload',
      { body: JSON.stringify({ kind: 'send-email', payload: { to: 'nope' } }) },
      400,
      /invalid payload for send-email: to: /,
    ],
    [
      'unknown field',
      { body: JSON.stringify({ kind: 'send-email', payload: email, extra: 1 }) },
      400,
      /invalid request/,
    ],
    [
      'bad options',
      { body: JSON.stringify({ kind: 'send-email', payload: email, options: { maxAttempts: 0 } }) },
      400,
      /maxAttempts/,
    ],
    [
      'oversized body',
      { body: JSON.stringify({ kind: 'send-email', payload: { ...email, body: 'x'.repeat(2_000_000) } }) },
      413,
      /over the 1048576-byte limit/,
    ],
  ])('%s → %i with a readable message, nothing written', async (_name, input, status, message) => {
    const response = (await handler()(
      httpApiEvent({
        headers: { ...bearer, ...(input as { headers?: Record<string, string> }).headers },
        body: input.body,
      }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(status);
    const body = JSON.parse(response.body);
    expect(body.error.message).toMatch(message);
    expect(response.body).not.toMatch(/at .*\.ts:\d+/); // no stack
    expect(await count()).toBe(0);
  });

  it('direct invoke: the event is the body, authorized by IAM', async () => {
    const result = await handler()({ kind: 'sync-profile', payload: { userId: 9, name: 'x' } });
    expect(result).toMatchObject({ status: 200, results: [{ outcome: 'inserted' }] });
    expect(await handler()({ kind: 'nope', payload: {} })).toMatchObject({
      status: 400,
      error: { code: 'unknown_kind' },
    });
  });
});

describe(`Lambda worker on a schedule (${testDriver()})`, () => {
  it('runs an invocation sized by getRemainingTimeInMillis and returns the summary', async () => {
    const done: number[] = [];
    const kind = defineJob({
      kind: 'tick',
      payload: z.object({ n: z.number() }),
      timeoutMs: 1_000,
      handler: (p) => {
        done.push(p.n);
      },
    });
    await createLambdaEnqueue([kind], { env: env() })({
      jobs: [1, 2, 3].map((n) => ({ kind: 'tick', payload: { n } })),
    });
    const context = lambdaContext(10_000);
    const summary = await createLambdaWorker([kind], { env: env() })(scheduledEvent(), context);
    expect(summary).toMatchObject({
      claimed: 3,
      completed: 3,
      stoppedBecause: 'drained',
      invocationId: context.awsRequestId,
    });
    // Each context is an invocation of its own.
    expect(lambdaContext(10_000).awsRequestId).not.toBe(context.awsRequestId);
    expect(done.sort()).toEqual([1, 2, 3]);
  });

  it('with little time left: claims only what fits, releases the rest, returns before the deadline despite a hung handler', async () => {
    // The invocation's clock moves only when told: job 0 hangs (until its 400 ms timeout), each
    // other job takes 250 ms of that clock.
    const clock = new ManualClock();
    let hung!: () => void;
    const hanging = new Promise<void>((resolve) => {
      hung = resolve;
    });
    const slow = defineJob({
      kind: 'slow',
      payload: z.object({ n: z.number() }),
      timeoutMs: 400,
      handler: (p) => {
        if (p.n === 0) {
          hung();
          return new Promise(() => {});
        }
        clock.advance(250);
      },
    });
    await createLambdaEnqueue([slow], { env: env() })({
      jobs: [0, 1, 2, 3, 4].map((n) => ({ kind: 'slow', payload: { n } })),
    });
    const worker = createLambdaWorker([slow], {
      env: env({ SKIPLOCK_SAFETY_MARGIN_MS: '100', SKIPLOCK_CONCURRENCY: '1', SKIPLOCK_BATCH_SIZE: '5' }),
      clock,
    });
    const running = worker(scheduledEvent(), { getRemainingTimeInMillis: () => 1_000, awsRequestId: 'req-1' });
    await hanging;
    clock.advance(400); // job 0 times out; job 1 then runs (to 650 ms); job 2 would end after the 900 ms cut-off
    const summary = await running;
    expect(summary).toMatchObject({ claimed: 5, retried: 1, completed: 1, released: 3 });
    const { rows } = await t.admin.query(
      `select count(*)::int as n from "${t.schema}".jobs where state = 'queued' and attempt = 0`,
    );
    expect(rows[0].n).toBe(3);
  });

  it('with SKIPLOCK_METRICS=emf, each invocation writes one Embedded Metric Format line', async () => {
    const kind = defineJob({ kind: 'tick', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handler: () => {} });
    await createLambdaEnqueue([kind], { env: env() })({ kind: 'tick', payload: { n: 1 } });
    const { lines } = await captureStdout(() =>
      createLambdaWorker([kind], {
        env: env({ SKIPLOCK_METRICS: 'emf', AWS_LAMBDA_FUNCTION_NAME: 'app-test-worker' }),
      })(scheduledEvent(), lambdaContext(10_000)),
    );
    const emf = lines.filter((l) => l.includes('"_aws"')).map((l) => JSON.parse(l));
    expect(emf).toEqual([
      expect.objectContaining({ Service: 'app-test-worker', JobsCompleted: 1, SuccessfulInvocations: 1 }),
    ]);
  });

  it('only the kinds and queues this deployment is configured for', async () => {
    const a = defineJob({ kind: 'a', queue: 'fast', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
    const b = defineJob({ kind: 'b', queue: 'slow', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
    await createLambdaEnqueue([a, b], { env: env() })({
      jobs: [
        { kind: 'a', payload: {} },
        { kind: 'b', payload: {} },
      ],
    });
    const summary = await createLambdaWorker([a, b], { env: env({ SKIPLOCK_QUEUES: 'slow' }) })(
      scheduledEvent(),
      lambdaContext(10_000),
    );
    expect(summary).toMatchObject({ claimed: 1, completed: 1 });
    const { rows } = await t.admin.query(`select kind, state from "${t.schema}".jobs order by kind`);
    expect(rows).toEqual([
      { kind: 'a', state: 'queued' },
      { kind: 'b', state: 'completed' },
    ]);
  });

  it('SKIPLOCK_COMPLETED_JOBS=delete: the deployed worker deletes completed jobs and counts them', async () => {
    const done = defineJob({ kind: 'done', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handler: () => {} });
    await createLambdaEnqueue([done], { env: env() })({ kind: 'done', payload: { n: 1 } });
    const worker = createLambdaWorker([done], { env: env({ SKIPLOCK_COMPLETED_JOBS: 'delete' }) });
    expect(await worker(scheduledEvent(), lambdaContext(10_000))).toMatchObject({ claimed: 1, completed: 1 });
    const { rows } = await t.admin.query(
      `select (select count(*)::int from "${t.schema}".jobs) as jobs,
         (select sum(completed)::int from "${t.schema}".completed_counts) as counted`,
    );
    expect(rows[0]).toEqual({ jobs: 0, counted: 1 });
  });
});

describe(`Lambda replay and maintenance (${testDriver()})`, () => {
  async function deadJob(): Promise<string> {
    const { results } = (await createLambdaEnqueue([sendEmail], { env: env() })({
      kind: 'send-email',
      payload: email,
    })) as {
      results: { id: string }[];
    };
    const { jobs } = await claimJobs(t.db.executor, t.schema, {
      leases: [{ kind: 'send-email', leaseMs: 10_000 }],
      limit: 1,
      invocationId: 'x',
    });
    await settleJobs(t.db.executor, t.schema, [
      {
        id: jobs[0]!.id,
        leaseToken: jobs[0]!.leaseToken,
        outcome: 'dead',
        reason: 'http_4xx',
        error: { class: 'E', message: 'gone' },
      },
    ]);
    return results[0]!.id;
  }

  it('replays by invoke, idempotently, and records who asked', async () => {
    const id = await deadJob();
    const replay = createLambdaReplay([sendEmail], { env: env() });
    const first = await replay({ ids: [id] }, lambdaContext(10_000, 'skiplock-replay'));
    expect(first).toMatchObject({ status: 200, replayed: [{ id }], refused: [] });
    const second = await replay({ ids: [Number(id)] }, lambdaContext(10_000, 'skiplock-replay'));
    expect(second).toMatchObject({ status: 200, replayed: [], refused: [{ id, state: 'queued' }] });
    const { rows } = await t.admin.query(`select replayed_by, replay_count from "${t.schema}".jobs where id = $1`, [
      id,
    ]);
    expect(rows[0]).toEqual({ replayed_by: 'lambda:skiplock-replay', replay_count: 1 });
  });

  it('refuses HTTP events and bad input', async () => {
    const replay = createLambdaReplay([sendEmail], { env: env() });
    expect(await replay(httpApiEvent({ body: '{"all":true}' }))).toMatchObject({ status: 404 });
    expect(await replay({})).toMatchObject({
      status: 400,
      error: { message: expect.stringMatching(/no ids and no filter/) },
    });
    expect(await replay({ ids: ['1 or 1=1'] })).toMatchObject({ status: 400 });
    expect(await replay({ ids: ['9999999999999999999'] })).toMatchObject({
      status: 400,
      error: { code: 'invalid_data' },
    });
    expect(await replay({ since: 'yesterday' })).toMatchObject({
      status: 400,
      error: { message: expect.stringMatching(/since/) },
    });
  });

  it('maintenance expires deadlines and prunes by retention', async () => {
    const deadId = await deadJob();
    await t.admin.query(`update "${t.schema}".jobs set finished_at = now() - interval '40 days' where id = $1`, [
      deadId,
    ]);
    await createLambdaEnqueue([sendEmail], { env: env() })({
      kind: 'send-email',
      payload: email,
      options: { deadline: new Date(Date.now() + 60_000).toISOString() },
    });
    await t.admin.query(
      `update "${t.schema}".jobs set deadline = now() - interval '1 second' where deadline is not null`,
    );
    const report = await createLambdaMaintenance({ env: env() })(scheduledEvent(), lambdaContext(10_000));
    expect(report).toMatchObject({ ok: true, expiredDeadlines: 1, prunedDead: 1, pruneFinished: true });
    const { rows } = await t.admin.query(`select state, dead_reason from "${t.schema}".jobs`);
    expect(rows).toEqual([{ state: 'dead', dead_reason: 'deadline_exceeded' }]);
  });
});
