import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaWorker } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelWorker } from '../../adapters/vercel.js';
import { ConfigError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { lambdaContext, scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// A deployed worker whose invocations are too short for a kind: refused as it is made when the
// platform's time is known there (Vercel's maxDuration, a Lambda's invocationMs); otherwise (a Lambda
// learns its time from each invocation's context) the invocation says no_kind_fits.
let t: TestContext;
useTestSchema('functions-worker-fit', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_SCHEMA: t.schema,
  CRON_SECRET: SECRETS.CRON_SECRET,
  SKIPLOCK_LOG_LEVEL: 'error',
  ...extra,
});
const payload = z.object({ n: z.number() });
// timeoutMs: the default, 30 s.
const report = defineJob({ kind: 'report', queue: 'reports', payload, handler: () => {} });
const quick = defineJob({ kind: 'quick', payload, timeoutMs: 1_000, handler: () => {} });
const REFUSED =
  "job kind report (timeoutMs 30000) never fits this worker's invocations: 20000 ms less safetyMarginMs 1000 and 500 ms to start leaves 18500 ms; raise the function's timeout or lower the kind's timeoutMs";

describe('a deployed worker with a kind that never fits its invocations', () => {
  it('createVercelWorker refuses it as the route is made: maxDurationMs, else SKIPLOCK_MAX_DURATION_MS', () => {
    expect(() => createVercelWorker([report, quick], { env: env(), maxDurationMs: 20_000 })).toThrow(ConfigError);
    expect(() => createVercelWorker([report, quick], { env: env(), maxDurationMs: 20_000 })).toThrow(REFUSED);
    expect(() => createVercelWorker([report, quick], { env: env({ SKIPLOCK_MAX_DURATION_MS: '20000' }) })).toThrow(
      REFUSED,
    );
    // The default budget (60 s) fits it; so does a route that leaves the kind or its queue out.
    expect(() => createVercelWorker([report, quick], { env: env() })).not.toThrow();
    expect(() =>
      createVercelWorker([report, quick], { env: env(), maxDurationMs: 20_000, kinds: ['quick'] }),
    ).not.toThrow();
    expect(() =>
      createVercelWorker([report, quick], { env: env({ SKIPLOCK_QUEUES: 'default' }), maxDurationMs: 20_000 }),
    ).not.toThrow();
    // The environment's safety margin counts (and the 500 ms an invocation takes to start).
    const margin = (ms: string) => () =>
      createVercelWorker([report], { env: env({ SKIPLOCK_SAFETY_MARGIN_MS: ms }), maxDurationMs: 31_000 });
    expect(margin('500')).not.toThrow();
    expect(margin('501')).toThrow(/report \(timeoutMs 30000\) never fits/);
  });

  it('slowQueues leaves a kind too long for the route to the route that serves its queue', async () => {
    const long = defineJob({ kind: 'long', payload, timeoutMs: 30_000, handler: () => {} });
    expect(() =>
      createVercelWorker([report, quick], { env: env(), maxDurationMs: 20_000, slowQueues: ['reports'] }),
    ).not.toThrow();
    // Only the named queues: a long kind of another queue is still refused.
    expect(() =>
      createVercelWorker([report, long], { env: env(), maxDurationMs: 20_000, slowQueues: ['reports'] }),
    ).toThrow(/long \(timeoutMs 30000\) never fits/);
    const [reportJob, quickJob] = await enqueuerFor(t.schema).enqueueMany(t.db, [
      report.with({ n: 1 }),
      quick.with({ n: 2 }),
    ]);
    const route = createVercelWorker([report, quick], { env: env(), maxDurationMs: 20_000, slowQueues: ['reports'] });
    const response = await route(
      new Request('https://app.example.com/api/worker', {
        headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
      }),
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ completed: 1, unfit: { kinds: [{ kind: 'report' }] } });
    const rows = await t.admin.query(`select id, state from "${t.schema}".jobs where id = any($1) order by id`, [
      [reportJob?.id, quickJob?.id],
    ]);
    expect(rows.rows).toEqual([
      { id: reportJob?.id, state: 'queued' },
      { id: quickJob?.id, state: 'completed' },
    ]);
  });

  it('a bad variable is left to the first request, which reports it', async () => {
    const route = createVercelWorker([report], {
      env: env({ SKIPLOCK_SAFETY_MARGIN_MS: 'soon' }),
      maxDurationMs: 20_000,
    });
    const response = await route(
      new Request('https://app.example.com/api/worker', {
        headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
      }),
    );
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({
      error: { code: 'config_error', message: expect.stringMatching(/SKIPLOCK_SAFETY_MARGIN_MS/) },
    });
  });

  it('createLambdaWorker refuses it when invocationMs is given; else each invocation says no_kind_fits', async () => {
    expect(() => createLambdaWorker([report, quick], { env: env(), invocationMs: 20_000 })).toThrow(REFUSED);
    expect(() => createLambdaWorker([report, quick], { env: env(), invocationMs: 60_000 })).not.toThrow();
    expect(() => createLambdaWorker([report], { env: env(), invocationMs: 20 })).toThrow(
      "invocationMs must be the function's timeout in ms, a whole number from 1000 to 900000",
    );
    // Unknown until an invocation: a 15 s one claims nothing, and its result says why.
    const [job] = await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 })]);
    const handler = createLambdaWorker([report], { env: env() });
    const result = await handler(scheduledEvent(), lambdaContext(15_000));
    expect(result).toMatchObject({
      claimed: 0,
      stoppedBecause: 'no_kind_fits',
      unfit: { budgetMs: expect.any(Number), kinds: [{ kind: 'report', timeoutMs: 30_000 }] },
    });
    const row = await t.admin.query(`select state, attempt from "${t.schema}".jobs where id = $1`, [job?.id]);
    expect(row.rows).toEqual([{ state: 'queued', attempt: 0 }]);
  });
});
