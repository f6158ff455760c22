// An idle Lambda app leaves the database alone: each invocation arms the next one-off wake-up it
// needs with EventBridge Scheduler — the real @aws-sdk/client-scheduler against a local stand-in
// that fires the schedules when the test moves its clock — and the fixed schedule is a safety net.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createLambdaEnqueue,
  createLambdaMaintenance,
  createLambdaWorker,
  NUDGE_EVENT,
  WAKE_EVENT,
} from '../../adapters/lambda.js';
import { createLambdaNudger } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createEnqueuer } from '../../core/enqueue.js';
import type { InvocationSummary } from '../../core/worker/index.js';
import { lambdaContext, scheduledEvent } from '../../testing/events.js';
import { type LocalScheduler, startLocalScheduler } from '../../testing/scheduler-endpoint.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { pingKind } from '../helpers/kinds.js';
import { startLambdaEndpoint, useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';
import { countStatements } from '../helpers/statements.js';
import { captureStdout } from '../helpers/stdout.js';

let t: TestContext;
useTestSchema('functions-lambda-wake', (ctx) => {
  t = ctx;
});
useLocalAwsCredentials();

const WORKER = 'skiplock-test-worker';
const MAINTENANCE = 'skiplock-test-maintenance';
const ROLE = 'arn:aws:iam::123456789012:role/skiplock-wake';
const arn = (name: string) => `arn:aws:lambda:us-east-1:123456789012:function:${name}`;
const MINUTE = 60_000;

const { ping, ran } = pingKind();
const env = (extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'warn',
  SKIPLOCK_WAKE_ROLE_ARN: ROLE,
  SKIPLOCK_MAINTENANCE_FUNCTION: MAINTENANCE,
  SKIPLOCK_NUDGE_FUNCTIONS: `pings=${WORKER}`,
  ...extra,
});

// The wall time of the app (and the time the database judges its claims at): a whole minute ahead
// of the database's clock, moved only by the test.
let now: Date;
let scheduler: LocalScheduler;
let workerRuns: InvocationSummary[];

/** The worker and maintenance handlers of one warm instance each, and the stand-in that fires them. */
async function app(extra: Record<string, string> = {}) {
  const e = env(extra);
  const worker = createLambdaWorker([ping], { env: e, test: { now: () => now } });
  const maintenance = createLambdaMaintenance({ env: e, test: { now: () => now } });
  const runWorker = async (event: unknown) => {
    const summary = (await worker(event, lambdaContext(30_000, WORKER))) as InvocationSummary;
    workerRuns.push(summary);
    return summary;
  };
  const runMaintenance = (event: unknown) =>
    maintenance(event, lambdaContext(60_000, MAINTENANCE)) as Promise<{ ok: boolean; quiet?: boolean }>;
  scheduler = await startLocalScheduler({ [WORKER]: runWorker, [MAINTENANCE]: runMaintenance });
  process.env.AWS_ENDPOINT_URL_SCHEDULER = scheduler.url;
  return { worker: runWorker, maintenance: runMaintenance, env: e };
}

const jobStates = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;
const rawInsert = (n: number) =>
  t.admin.query(`insert into "${t.schema}".jobs (kind, queue, payload) values ('ping', 'pings', $1)`, [
    JSON.stringify({ n }),
  ]);
const armed = () =>
  scheduler.created
    .map((s) => ({ target: s.targetArn.split(':')[6], at: s.at.toISOString() }))
    .sort((a, b) => (a.target ?? '').localeCompare(b.target ?? '') || a.at.localeCompare(b.at));

beforeEach(() => {
  now = new Date(Math.ceil(Date.now() / MINUTE) * MINUTE + MINUTE);
  ran.length = 0;
  workerRuns = [];
});
afterEach(async () => {
  await scheduler?.close();
  await resetSharedRuntime();
});

describe(`one-off wake-ups with EventBridge Scheduler (${testDriver()})`, () => {
  it('an idle tick arms a wake at the next job’s run_at; nothing reaches the database until it fires', async () => {
    const { worker } = await app();
    const runAt = new Date(now.getTime() + 30 * MINUTE + 15_000);
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 1 }, { runAt });
    const idle = await worker(scheduledEvent());
    expect(idle).toMatchObject({ claimed: 0, nextDueAt: runAt.getTime() });
    const wakeAt = new Date(now.getTime() + 31 * MINUTE); // run_at rounded up to the minute
    expect(scheduler.created).toMatchObject([
      {
        name: `skiplock-${WORKER}-${wakeAt.toISOString().slice(0, 16).replace(/[-T:]/g, '')}`,
        at: wakeAt,
        targetArn: arn(WORKER),
        roleArn: ROLE,
        input: WAKE_EVENT,
        actionAfterCompletion: 'DELETE',
      },
    ]);
    // 30 minutes go by, one at a time: nothing fires, not one statement is sent.
    const quiet = await countStatements(testDriver(), async () => {
      for (let m = 0; m < 30; m++) {
        now = new Date(now.getTime() + MINUTE);
        expect(await scheduler.fireDue(now)).toEqual([]);
      }
    });
    expect(quiet.statements).toBe(0);
    now = wakeAt;
    // Counted the same way, the wake-up's invocation is seen sending its statements.
    const woken = await countStatements(testDriver(), () => scheduler.fireDue(now));
    expect(woken.result.map((s) => s.input)).toEqual([WAKE_EVENT]);
    expect(woken.statements).toBeGreaterThan(0);
    expect(ran).toEqual([1]);
    expect(workerRuns.at(-1)).toMatchObject({ claimed: 1, completed: 1 });
  });

  it('a busy invocation arms the next minute, and maintenance in its 10-minute slot', async () => {
    const { worker } = await app();
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 2 });
    expect(await worker(scheduledEvent())).toMatchObject({ claimed: 1, completed: 1 });
    const slot = Math.ceil((now.getTime() + 20_000) / (10 * MINUTE)) * 10 * MINUTE;
    expect(armed()).toEqual([
      { target: MAINTENANCE, at: new Date(slot).toISOString() },
      { target: WORKER, at: new Date(now.getTime() + MINUTE).toISOString() },
    ]);
  });

  it('nothing due: nothing is armed; the safety-net tick still runs a job written with raw SQL', async () => {
    const { worker } = await app();
    expect(await worker(scheduledEvent())).toMatchObject({ claimed: 0, nextDueAt: null });
    expect(scheduler.requests()).toBe(0);
    await rawInsert(3);
    now = new Date(now.getTime() + 360 * MINUTE); // the fixed rule's rate(6 hours)
    expect(await worker(scheduledEvent())).toMatchObject({ claimed: 1, completed: 1 });
    expect(ran).toEqual([3]);
  });

  it('a write through the enqueuer with the Lambda nudger arms its worker, once per minute per instance', async () => {
    await app();
    const nudger = createLambdaNudger(
      { pings: WORKER },
      { wake: { roleArn: ROLE, now: () => now.getTime() }, coalesceMs: 0 },
    );
    const enqueuer = createEnqueuer({ schema: t.schema, nudger });
    const later = new Date(now.getTime() + 2 * 3_600_000 + 1_000);
    await enqueuer.enqueue(t.db, ping, { n: 4 }, { runAt: later });
    for (const n of [5, 6, 7]) await enqueuer.enqueue(t.db, ping, { n }); // due now: the next minute, once
    expect(armed()).toEqual([
      { target: WORKER, at: new Date(now.getTime() + MINUTE).toISOString() },
      { target: WORKER, at: new Date(later.getTime() - 1_000 + MINUTE).toISOString() },
    ]);
    expect(scheduler.requests()).toBe(2);
    now = new Date(now.getTime() + MINUTE);
    await scheduler.fireDue(now);
    expect(ran.sort()).toEqual([5, 6, 7]);
  });

  it('the deployed enqueue function nudges and arms the worker (the armed wake covers a lost nudge)', async () => {
    const { env: e } = await app();
    const lambda = await startLambdaEndpoint(); // records the nudge, runs nothing
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    // The deployed enqueue function reads its wall time from Date.now (its options take no test
    // time): the test's time stands in for it, so the wake's minute is known exactly.
    const wallClock = vi.spyOn(Date, 'now').mockImplementation(() => now.getTime());
    try {
      expect(await createLambdaEnqueue([ping], { env: e })({ kind: 'ping', payload: { n: 8 } })).toMatchObject({
        status: 200,
      });
      expect(lambda.invokes).toEqual([{ functionName: WORKER, invocationType: 'Event', payload: NUDGE_EVENT }]);
      // Due now: the next whole minute at least 20 s away, as a per-minute tick would run it.
      expect(armed()).toEqual([{ target: WORKER, at: new Date(now.getTime() + MINUTE).toISOString() }]);
    } finally {
      wallClock.mockRestore();
      await lambda.close();
    }
  });

  it('a scheduler that refuses is logged once per instance, and nothing is lost', async () => {
    const { worker } = await app();
    scheduler.refuse({
      status: 400,
      type: 'AccessDeniedException',
      message: 'not authorized to perform: iam:PassRole on resource: skiplock-wake',
    });
    const { lines } = await captureStdout(async () => {
      for (const n of [9, 10]) {
        await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n });
        expect(await worker(scheduledEvent())).toMatchObject({ claimed: 1, completed: 1 });
        now = new Date(now.getTime() + 10 * MINUTE); // another minute and another maintenance slot
      }
    });
    const failures = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'wake_failed');
    expect(failures).toHaveLength(1);
    expect(failures[0].error).toMatch(/AccessDeniedException: not authorized to perform: iam:PassRole/);
    expect(failures[0].hint).toMatch(/SKIPLOCK_IDLE_RECHECK_MINUTES/);
    expect(scheduler.requests()).toBe(4); // each wake tried once: worker and maintenance, twice
    expect(ran).toEqual([9, 10]);
    expect(await jobStates()).toEqual([{ state: 'completed', n: 2 }]);
  });

  it('SKIPLOCK_IDLE=false arms nothing and reads no next-due time: every tick as before', async () => {
    const { worker, env: e } = await app({ SKIPLOCK_IDLE: 'false' });
    const idle = await worker(scheduledEvent());
    expect(idle).toMatchObject({ claimed: 0 });
    expect(idle).not.toHaveProperty('nextDueAt');
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 11 });
    expect(await worker(scheduledEvent())).toMatchObject({ claimed: 1, completed: 1 });
    const lambda = await startLambdaEndpoint();
    process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
    try {
      const enqueue = createLambdaEnqueue([ping], { env: e });
      expect(await enqueue({ kind: 'ping', payload: { n: 12 } })).toMatchObject({ status: 200 });
      expect(lambda.invokes).toHaveLength(1); // the nudge, as before
    } finally {
      await lambda.close();
    }
    expect(scheduler.requests()).toBe(0);
  });

  it('maintenance: a quiet tick arms nothing; busy workers arm it once per 10-minute slot', async () => {
    const { worker, maintenance } = await app();
    expect(await maintenance(scheduledEvent())).toMatchObject({ ok: true, quiet: true });
    expect(scheduler.requests()).toBe(0);
    // Two warm worker instances, busy in the same slot: one maintenance wake between them.
    const other = createLambdaWorker([ping], { env: env(), test: { now: () => now } });
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 13 });
    await worker(scheduledEvent());
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, ping, { n: 14 });
    await other(scheduledEvent(), lambdaContext(30_000, WORKER));
    const maintenanceWakes = () => scheduler.created.filter((s) => s.targetArn === arn(MAINTENANCE));
    expect(maintenanceWakes()).toHaveLength(1);
    // Fired while a job no worker here serves is ready (not quiet): maintenance arms its next slot.
    await t.admin.query(`insert into "${t.schema}".jobs (kind, queue) values ('elsewhere', 'elsewhere')`);
    now = maintenanceWakes()[0]?.at as Date;
    const { result: fired } = await captureStdout(() => scheduler.fireDue(now)); // queue_unserved: expected
    expect(fired.map((s) => s.targetArn)).toContain(arn(MAINTENANCE));
    expect(maintenanceWakes().map((s) => s.at.getTime() - now.getTime())).toEqual([0, 10 * MINUTE]);
  });
});
