// A deployed worker keeps what its warm instance learnt between invocations: the handler that
// createLambdaWorker returns (and the route createVercelWorker returns) is built once per instance
// and invoked many times, as the platform does. Each test invokes one handler twice or more.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaWorker } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelWorker } from '../../adapters/vercel.js';
import { defineJob, type JobDefinition } from '../../core/jobs.js';
import type { InvocationSummary } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStdout } from '../helpers/stdout.js';
import { SECRETS } from '../helpers/vercel-routes.js';

let t: TestContext;
useTestSchema('functions-warm-instance', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = () => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'warn',
  SKIPLOCK_SAFETY_MARGIN_MS: '100',
  CRON_SECRET: SECRETS.CRON_SECRET,
});

// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
type Kinds = readonly JobDefinition<any, any>[];
/** One warm instance of a worker function: `invoke` runs one invocation with `remainingMs` left. */
type Instance = { invoke: (remainingMs: number) => Promise<InvocationSummary> };

const platforms: { name: string; instance: (jobs: Kinds, clock: ManualClock) => Instance }[] = [
  {
    name: 'Lambda (createLambdaWorker)',
    instance: (jobs, clock) => {
      const handler = createLambdaWorker(jobs, { env: env(), clock });
      return {
        invoke: async (remainingMs) => {
          const awsRequestId = randomUUID();
          const summary = (await handler(scheduledEvent(), {
            getRemainingTimeInMillis: () => remainingMs,
            awsRequestId,
          })) as InvocationSummary;
          // What comes with each invocation stays its own.
          expect(summary.invocationId).toBe(awsRequestId);
          return summary;
        },
      };
    },
  },
  {
    name: 'Vercel (createVercelWorker)',
    instance: (jobs, clock) => {
      // Vercel's budget is the route's maxDuration: the same for every request of the instance.
      let route: ((request: Request) => Promise<Response>) | undefined;
      return {
        invoke: async (remainingMs) => {
          route ??= createVercelWorker(jobs, { env: env(), clock, maxDurationMs: remainingMs });
          const response = await route(
            new Request('https://app.example.com/api/worker', {
              headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
            }),
          );
          expect(response.status).toBe(200);
          return (await response.json()) as InvocationSummary;
        },
      };
    },
  },
];

const tick = defineJob({ kind: 'tick', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });

describe.each(platforms)(`a warm instance of the worker function: $name (${testDriver()})`, ({ name, instance }) => {
  it('records what it serves in `workers` once a minute, not on every invocation', async () => {
    const clock = new ManualClock();
    const worker = instance([tick], clock);
    expect(await worker.invoke(10_000)).toMatchObject({ stoppedBecause: 'drained' });
    const seen = async () =>
      (await t.admin.query(`select seen_at::text as at from "${t.schema}".workers`)).rows.map((r) => r.at);
    expect(await seen()).toHaveLength(1);
    // Marks the row: an upsert moves seen_at to the database's now().
    await t.admin.query(`update "${t.schema}".workers set seen_at = '2000-01-01T00:00:00Z'`);
    clock.advance(30_000);
    await worker.invoke(10_000);
    expect(await seen()).toEqual(['2000-01-01 00:00:00+00']);
    clock.advance(30_000);
    await worker.invoke(10_000);
    const [moved] = await seen();
    expect(moved).not.toBe('2000-01-01 00:00:00+00');
  });

  it('says kinds_never_fit once, however many invocations find the kind too long (Vercel: refused as the route is made)', async () => {
    const clock = new ManualClock();
    const long = defineJob({ kind: 'long', payload: z.object({}), timeoutMs: 60_000, handler: () => {} });
    const worker = instance([tick, long], clock);
    if (name.startsWith('Vercel')) {
      // The route knows its maxDuration when it is made, so it refuses the kind then.
      await expect(worker.invoke(10_000)).rejects.toThrow(/job kind long \(timeoutMs 60000\) never fits/);
      return;
    }
    const { lines } = await captureStdout(async () => {
      for (let i = 0; i < 3; i++) {
        await worker.invoke(10_000);
        clock.advance(1_000);
      }
    });
    const warned = lines.filter((l) => l.includes('kinds_never_fit')).map((l) => JSON.parse(l));
    expect(warned).toHaveLength(1);
    expect(warned[0].kinds).toEqual([{ kind: 'long', timeoutMs: 60_000 }]);
  });

  it("runs a step that fits by the p95 of the instance's earlier runs of it, learnt in an earlier invocation", async () => {
    const clock = new ManualClock();
    // The step takes 100 ms; with `late`, the handler first spends 1 s. With 2 s for attempts, the
    // step fits a late job only by its p95 (1.1 s), not by the kind's timeout (3 s).
    const stepped = defineJob({
      kind: 'stepped',
      payload: z.object({ late: z.boolean() }),
      timeoutMs: 1_500,
      handler: async (p, ctx) => {
        if (p.late) clock.advance(1_000);
        await ctx.step('send', () => {
          clock.advance(100);
        });
      },
    });
    const worker = instance([stepped], clock);
    const enqueue = (late: boolean) => enqueuerFor(t.schema).enqueueMany(t.db, [stepped.with({ late })]);
    await enqueue(false);
    expect(await worker.invoke(2_100)).toMatchObject({ claimed: 1, completed: 1 });
    await enqueue(true);
    const second = await worker.invoke(2_100);
    expect(second).toMatchObject({ claimed: 1, completed: 1 });
    expect(second.suspended).toBeUndefined();
  });
});
