import { type DataPoint, type Histogram, MeterProvider } from '@opentelemetry/sdk-metrics';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { otelMetrics } from '../../adapters/otel.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { DiscardError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { maintenanceTick, PullReader } from '../helpers/otel.js';

// OpenTelemetry metrics through the SDK's own reader: what a worker and a maintenance tick record.
let t: TestContext;
useTestSchema('core-metrics-otel', (ctx) => {
  t = ctx;
});
afterAll(() => resetSharedRuntime());

async function collected(reader: PullReader) {
  const { resourceMetrics } = await reader.collect();
  const byName = new Map<string, DataPoint<number | Histogram>[]>();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics)
      byName.set(metric.descriptor.name, metric.dataPoints as DataPoint<number | Histogram>[]);
  }
  /** The value of `name` where the attributes include `where` (a counter's sum, a gauge's value, a histogram's count). */
  return (name: string, where: Record<string, unknown> = {}) =>
    (byName.get(name) ?? [])
      .filter((p) => Object.entries(where).every(([k, v]) => p.attributes[k] === v))
      .reduce((sum, p) => sum + (typeof p.value === 'number' ? p.value : p.value.count), 0);
}

describe('OpenTelemetry metrics (otelMetrics)', () => {
  it('counts attempts by queue, kind and outcome, times them, counts invocations, and gauges the depth a maintenance tick read', async () => {
    const reader = new PullReader();
    const meter = new MeterProvider({ readers: [reader] }).getMeter('test');
    const metrics = otelMetrics({ meter });
    const payload = z.object({ n: z.number() });
    let thrown = false;
    const ok = defineJob({ kind: 'ok', queue: 'emails', payload, handler: () => {} });
    const bad = defineJob({
      kind: 'bad',
      payload,
      handler: () => {
        throw new DiscardError('no such customer');
      },
    });
    const flaky = defineJob({
      kind: 'flaky',
      payload,
      handler: () => {
        if (!thrown) {
          thrown = true;
          throw new Error('partner timed out');
        }
      },
    });
    const q = enqueuerFor(t.schema);
    await q.enqueueMany(t.db, [ok.with({ n: 1 }), ok.with({ n: 2 }), bad.with({ n: 3 }), flaky.with({ n: 4 })]);
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [ok, bad, flaky],
      logger: silentLogger,
      metrics,
    }).runInvocation({
      remainingMs: 60_000,
    });
    expect(summary).toMatchObject({ completed: 2, dead: 1, retried: 1 });
    let value = await collected(reader);
    expect(value('skiplock.jobs.started')).toBe(4);
    expect(value('skiplock.jobs.started', { 'messaging.destination.name': 'emails', 'skiplock.job.kind': 'ok' })).toBe(
      2,
    );
    expect(value('skiplock.jobs.ended', { 'skiplock.job.kind': 'ok', 'skiplock.job.outcome': 'completed' })).toBe(2);
    expect(value('skiplock.jobs.ended', { 'skiplock.job.kind': 'bad', 'skiplock.job.outcome': 'dead' })).toBe(1);
    expect(value('skiplock.jobs.ended', { 'skiplock.job.kind': 'flaky', 'skiplock.job.outcome': 'retry' })).toBe(1);
    expect(value('skiplock.attempt.duration')).toBe(4); // four recorded durations
    expect(value('skiplock.invocations', { 'skiplock.invocation.stopped_because': 'drained' })).toBe(1);

    // The maintenance tick's depth: three jobs wait on 'emails'.
    await q.enqueueMany(t.db, [ok.with({ n: 5 }), ok.with({ n: 6 }), ok.with({ n: 7 })]);
    await maintenanceTick(metrics, t.schema);
    value = await collected(reader);
    expect(value('skiplock.queue.ready', { 'messaging.destination.name': 'emails', 'skiplock.job.kind': 'ok' })).toBe(
      3,
    );
    expect(value('skiplock.queue.dead', { 'skiplock.job.kind': 'bad' })).toBe(1);
  });
});
