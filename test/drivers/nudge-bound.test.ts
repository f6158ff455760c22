// A nudge never holds an enqueue's answer (#28): with a worker target that accepts connections and
// never answers — a stuck or cold function — every enqueue is answered within the nudge's bound
// (2 s), its job committed, the failure logged with its cause. On every driver: the library's
// enqueue, the Lambda enqueue function (the real AWS SDK) and the Vercel enqueue route.
import { afterEach, describe, expect, it } from 'vitest';
import { createLambdaEnqueue } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelEnqueue } from '../../adapters/vercel.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { createNudger } from '../../core/nudge.js';
import { ManualClock } from '../../testing/clock.js';
import { httpApiEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { pingKind } from '../helpers/kinds.js';
import { useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';
import { captureStdout } from '../helpers/stdout.js';
import { type StuckTarget, startStuckTarget } from '../helpers/stuck-target.js';

let t: TestContext;
useTestSchema('drivers-nudge-bound', (ctx) => {
  t = ctx;
});
useLocalAwsCredentials();
afterEach(() => resetSharedRuntime());

const TOKEN = 'enqueue-token-0123456789abcdef';
const { ping } = pingKind();
const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'warn',
  SKIPLOCK_ENQUEUE_TOKEN: TOKEN,
  ...extra,
});
const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

/** `run` against a stuck target, with what it logged (stdout) meanwhile; the target closed after. */
async function stuckTarget<T>(
  run: (port: number, target: StuckTarget) => Promise<T>,
): Promise<{ result: T; lines: string[] }> {
  const target = await startStuckTarget();
  try {
    return await captureStdout(() => run(target.port, target));
  } finally {
    await target.close();
  }
}
const nudgeFailures = (lines: string[]) =>
  lines
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; error?: string })
    .filter((l) => l.msg === 'nudge_failed');

describe(`a nudge target that accepts connections and never answers (${testDriver()})`, () => {
  it('Lambda: the enqueue function answers when the nudge bound ends on its clock, its job committed; the failure is logged', async () => {
    // The bound runs on the function's clock (the nudges' clock): the answer waits for it, not for
    // the target, and not for the real time a loaded machine takes.
    const clock = new ManualClock();
    const { result: response, lines } = await stuckTarget(async (port, target) => {
      process.env.AWS_ENDPOINT_URL_LAMBDA = `http://127.0.0.1:${port}`;
      try {
        const enqueue = createLambdaEnqueue([ping], {
          env: env({ SKIPLOCK_NUDGE_FUNCTIONS: 'pings=skiplock-stuck' }),
          clock,
        });
        let answered = false;
        const answer = (
          enqueue(
            httpApiEvent({
              headers: { authorization: `Bearer ${TOKEN}` },
              body: JSON.stringify({ kind: 'ping', payload: { n: 7 } }),
            }),
          ) as Promise<{ statusCode: number }>
        ).finally(() => {
          answered = true;
        });
        // The nudge's Invoke reached the target, which never answers: the enqueue waits for its bound.
        expect(await target.firstAccepted()).toBe(1);
        expect(answered).toBe(false);
        clock.advance(2_000);
        return await answer;
      } finally {
        delete process.env.AWS_ENDPOINT_URL_LAMBDA;
      }
    });
    expect(response.statusCode).toBe(200);
    expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    const failed = nudgeFailures(lines);
    expect(failed).toHaveLength(1);
    expect(failed[0]?.error).toMatch(/did not answer within 2000 ms/);
  });

  it('Vercel: the enqueue route answers while its start still waits at the target, its job committed, the start left to waitUntil', async () => {
    const pending: Promise<unknown>[] = [];
    const { result: status } = await stuckTarget(async (port, target) => {
      const enqueue = createVercelEnqueue([ping], {
        env: env({
          SKIPLOCK_NUDGE_ROUTES: `pings=http://127.0.0.1:${port}/api/worker`,
          CRON_SECRET: 'cron-secret-0123456789',
        }),
        // The platform keeps the function alive for these after the response; the test collects them.
        waitUntil: (promise) => void pending.push(promise.catch(() => {})),
      });
      const response = await enqueue(
        new Request('https://app.example.com/api/enqueue', {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'ping', payload: { n: 8 } }),
        }),
      );
      // The worker route's request did reach the stuck target, and still waits there (under
      // waitUntil): the route answered without waiting for it, or for its 10 s accept timeout.
      expect(await target.firstAccepted()).toBe(1);
      expect(target.open()).toBe(1);
      return response.status;
    });
    expect(status).toBe(200);
    expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    // The target closed: the start fails and is logged (nudge_failed); nothing is left pending.
    await Promise.all(pending);
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
    // The nudge's bound is a timer on the nudger clock once the insert's answer is back (which on
    // the Neon drivers comes a little after the row is visible to others).
    for (let i = 0; i < 1_000 && clock.pending === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(await states()).toEqual([{ state: 'queued', n: 1 }]);
    expect(answered).toBe(false);
    clock.advance(2_000);
    expect(await enqueued).toMatchObject({ outcome: 'inserted' });
    expect(lines).toEqual([expect.stringMatching(/^nudge_failed .*did not answer within 2000 ms/)]);
  });
});
