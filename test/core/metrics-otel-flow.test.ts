import { type DataPoint, type Histogram, MeterProvider } from '@opentelemetry/sdk-metrics';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { otelMetrics } from '../../adapters/otel.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { RetryError } from '../../base/errors.js';
import { defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { maintenanceTick, PullReader } from '../helpers/otel.js';
import { WatchingClock } from '../helpers/supplied-clock.js';

// OpenTelemetry metrics of flow control, through the SDK's own reader: the time an invocation waited
// for a rate limit, the moves of a destination's circuit breaker, and the age of the oldest ready
// job a maintenance tick read.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-metrics-otel-flow', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});
afterAll(() => resetSharedRuntime());

/** A fresh meter and otelMetrics() on it, and what its reader collects now: each instrument's points. */
function meter() {
  const reader = new PullReader();
  const metrics = otelMetrics({ meter: new MeterProvider({ readers: [reader] }).getMeter('test') });
  const points = async (name: string) => {
    const { resourceMetrics } = await reader.collect();
    const found = resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .filter((m) => m.descriptor.name === name)
      .flatMap((m) => m.dataPoints as DataPoint<number | Histogram>[]);
    return found.map((p) => ({ attributes: { ...p.attributes }, value: p.value }));
  };
  return { metrics, points };
}

const payload = z.object({ n: z.number() });

describe('OpenTelemetry metrics of flow control (otelMetrics)', () => {
  it('adds the time an invocation waited for a rate limit to skiplock.rate_limit.wait, in ms and without attributes', async () => {
    const { metrics, points } = meter();
    const clock = new WatchingClock();
    const ran: number[] = [];
    // Three starts a minute, four jobs: the fourth waits for the first start to leave the period.
    const call = defineJob({
      kind: 'call-partner',
      queue: defineQueue({ name: 'partner', rateLimit: { limit: 3, periodMs: 60_000 } }),
      payload,
      timeoutMs: 1_000,
      handler: ({ n }) => void ran.push(n),
    });
    await q.enqueueMany(
      t.db,
      Array.from({ length: 4 }, (_, n) => call.with({ n })),
    );
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [call],
      clock,
      rateWaitMs: 90_000,
      logger: silentLogger,
      metrics,
    });
    expect(await points('skiplock.rate_limit.wait')).toEqual([]);
    // The first timer of a rate's length (the attempts' timeouts and flushes are much shorter).
    const waiting = clock.nextTimer(30_000, 90_000);
    const run = worker.runInvocation({ remainingMs: 600_000 });
    const waitMs = await waiting;
    // The next token comes back a period after the first start (recorded rounded up to 1/100 of
    // the period): up to 60.6 s on the supplied clock, which has not moved since the claim.
    expect(waitMs).toBeGreaterThan(50_000);
    expect(waitMs).toBeLessThanOrEqual(60_600);
    expect(ran).toEqual([0, 1, 2]);
    // Counted as the wait begins, once, with no attributes.
    expect(await points('skiplock.rate_limit.wait')).toEqual([{ attributes: {}, value: waitMs }]);
    // A period passes, as far as the database can tell: the recorded starts move a period back.
    await t.admin.query(
      `update "${t.schema}".rate_buckets set starts = (select array_agg(x - interval '61 seconds') from unnest(starts) x)`,
    );
    clock.advance(waitMs);
    const summary = await run;
    expect(ran).toEqual([0, 1, 2, 3]);
    expect(summary).toMatchObject({ completed: 4, stoppedBecause: 'drained', rateWaitMs: waitMs });
    expect(await points('skiplock.rate_limit.wait')).toEqual([{ attributes: {}, value: waitMs }]);
  });

  it('counts each move of a breaker in skiplock.breaker.transitions, and gauges its state at each maintenance tick', async () => {
    const { metrics, points } = meter();
    let down = true;
    const webhook = defineJob({
      kind: 'webhook',
      payload: z.object({ url: z.string() }),
      destination: (p) => new URL(p.url).host,
      maxAttempts: 10,
      backoff: { type: 'constant', delayMs: 0 },
      handler: async (p) => {
        if (down && new URL(p.url).host === 'down.example') {
          throw new RetryError('receiver answered 503', { response: { status: 503, body: 'unavailable' } });
        }
      },
    });
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 5 }, (_, n) => webhook.with({ url: `https://down.example/hook/${n}` })),
      ...Array.from({ length: 3 }, (_, n) => webhook.with({ url: `https://up.example/hook/${n}` })),
    ]);
    // Batches of one: each outcome is written before the next claim.
    const worker = () =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [webhook],
        concurrency: 1,
        batchSize: 1,
        logger: silentLogger,
        metrics,
      });
    const breaker = (from: string, to: string) => ({
      attributes: { 'skiplock.destination': 'down.example', 'skiplock.breaker.from': from, 'skiplock.breaker.to': to },
      value: 1,
    });
    // Five failures (the default threshold) open it; the jobs of up.example move nothing.
    const first = await worker().runInvocation({ remainingMs: 60_000 });
    expect(first.breakers).toEqual([{ destination: 'down.example', from: 'closed', to: 'open' }]);
    expect(await points('skiplock.breaker.transitions')).toEqual([breaker('closed', 'open')]);
    const state = async () =>
      (await t.admin.query(`select state from "${t.schema}".destinations where name = 'down.example'`)).rows[0].state;
    expect(await state()).toBe('open');
    // The maintenance tick reads every breaker: 1 for the state it is in, 0 for the others.
    await maintenanceTick(metrics, t.schema);
    const stateOf = async () =>
      Object.fromEntries(
        (await points('skiplock.breaker.state'))
          .filter((p) => p.attributes['skiplock.destination'] === 'down.example')
          .map((p) => [p.attributes['skiplock.breaker.state'], p.value]),
      );
    expect(await stateOf()).toEqual({ closed: 0, open: 1, half_open: 0 });

    // The cool-down is over, as far as the database can tell: one probe goes through, succeeds, and
    // closes the breaker; the other jobs follow.
    await t.admin.query(
      `update "${t.schema}".destinations set open_until = now() - interval '1 second' where name = 'down.example'`,
    );
    down = false;
    const second = await worker().runInvocation({ remainingMs: 60_000 });
    expect(second.breakers).toEqual([
      { destination: 'down.example', from: 'open', to: 'half_open' },
      { destination: 'down.example', from: 'half_open', to: 'closed' },
    ]);
    expect(await state()).toBe('closed');
    const moves = await points('skiplock.breaker.transitions');
    expect(moves).toHaveLength(3);
    expect(moves).toEqual(
      expect.arrayContaining([breaker('closed', 'open'), breaker('open', 'half_open'), breaker('half_open', 'closed')]),
    );
    const left = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state <> 'completed'`);
    expect(left.rows[0].n).toBe(0);
    await maintenanceTick(metrics, t.schema);
    expect(await stateOf()).toEqual({ closed: 1, open: 0, half_open: 0 });
  });

  it('gauges skiplock.queue.oldest_ready_age in seconds per queue and kind from the maintenance tick', async () => {
    const { metrics, points } = meter();
    const ok = defineJob({ kind: 'ok', queue: 'emails', payload });
    const report = defineJob({ kind: 'report', payload });
    // The jobs' run_at, supplied: whole milliseconds before the database's clock at `before`.
    const dbNowMs = async () =>
      Number((await t.admin.query(`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`)).rows[0].ms);
    const before = await dbNowMs();
    const base = Math.floor(before);
    await q.enqueueMany(t.db, [
      ok.with({ n: 1 }, { runAt: new Date(base - 90_000) }), // the oldest of emails/ok
      ok.with({ n: 2 }, { runAt: new Date(base - 30_000) }),
      ok.with({ n: 3 }, { delayMs: 3_600_000 }), // not ready: no part of the age
      report.with({ n: 4 }, { runAt: new Date(base - 600_000) }),
    ]);
    await maintenanceTick(metrics, t.schema);
    const after = await dbNowMs();
    const ages = await points('skiplock.queue.oldest_ready_age');
    const attributes = (queue: string, kind: string) => ({
      'messaging.system': 'skiplock',
      'messaging.destination.name': queue,
      'skiplock.job.kind': kind,
    });
    expect(ages.map((p) => p.attributes)).toEqual(
      expect.arrayContaining([attributes('emails', 'ok'), attributes('default', 'report')]),
    );
    expect(ages).toHaveLength(2);
    const age = (queue: string) => ages.find((p) => p.attributes['messaging.destination.name'] === queue)?.value;
    // The tick read the stats between `before` and `after` (the database's clock): the age of the
    // oldest ready job is its wait then, in seconds.
    expect(age('emails')).toBeGreaterThanOrEqual((before - (base - 90_000)) / 1000);
    expect(age('emails')).toBeLessThanOrEqual((after - (base - 90_000)) / 1000);
    expect(age('default')).toBeGreaterThanOrEqual((before - (base - 600_000)) / 1000);
    expect(age('default')).toBeLessThanOrEqual((after - (base - 600_000)) / 1000);
    expect(await points('skiplock.queue.ready')).toEqual(
      expect.arrayContaining([
        { attributes: attributes('emails', 'ok'), value: 2 },
        { attributes: attributes('default', 'report'), value: 1 },
      ]),
    );
  });
});
