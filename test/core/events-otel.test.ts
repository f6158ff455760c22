import { context, SpanKind } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { otelMetrics, otelTracing } from '../../adapters/otel.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, subscribe, syncSubscriptions } from '../../core/events.js';
import { JobRegistry } from '../../core/jobs.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { PullReader } from '../helpers/otel.js';

// A publish's producer span (its context stored with the subscribers' jobs) and the events counter.
let t: TestContext;
useTestSchema('core-events-otel', (ctx) => {
  t = ctx;
});
const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('test');
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  contextManager.disable();
  context.disable();
});

const paid = defineEvent({ name: 'invoice.paid', schema: z.object({ id: z.number() }) });

describe('events in OpenTelemetry', () => {
  it('a publish is a `publish <event>` PRODUCER span whose context each subscriber job stores; the counter counts events and jobs', async () => {
    const reader = new PullReader();
    const meter = new MeterProvider({ readers: [reader] }).getMeter('test');
    const q = createEnqueuer({ schema: t.schema, tracing: otelTracing({ tracer }), metrics: otelMetrics({ meter }) });
    const subs = [subscribe(paid, { kind: 'book-revenue' }), subscribe(paid, { kind: 'thank-customer' })];
    await syncSubscriptions(t.db, new JobRegistry(subs), { schema: t.schema });
    const result = await q.publish(t.db, paid, { id: 1 }, { dedupeKey: 'inv-1' });
    await q.publish(t.db, paid, { id: 1 }, { dedupeKey: 'inv-1' }); // a duplicate: not counted
    const lonely = defineEvent({ name: 'nobody.listens', schema: z.object({}) });
    await q.publish(t.db, lonely, {});

    const spans = exporter.getFinishedSpans().filter((s) => s.name === 'publish invoice.paid');
    expect(spans).toHaveLength(2);
    const span = spans[0] as (typeof spans)[number];
    expect(span.kind).toBe(SpanKind.PRODUCER);
    expect(span.attributes['messaging.batch.message_count']).toBe(2);
    const stored = (
      await t.admin.query(
        `select trace_context->>'traceparent' as tp from "${t.schema}".jobs where id = any($1::bigint[])`,
        [result.jobs.map((j) => j.id)],
      )
    ).rows;
    expect(stored.map((r) => r.tp)).toEqual([
      `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`,
      `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`,
    ]);

    const { resourceMetrics } = await reader.collect();
    const points = resourceMetrics.scopeMetrics
      .flatMap((s) => s.metrics)
      .flatMap((m) => m.dataPoints.map((p) => ({ name: m.descriptor.name, attributes: p.attributes, value: p.value })));
    const value = (name: string, event: string) =>
      points.find((p) => p.name === name && p.attributes['skiplock.event.name'] === event);
    expect(value('skiplock.events.published', 'invoice.paid')).toMatchObject({
      value: 1,
      attributes: { 'skiplock.event.subscribed': true },
    });
    expect(value('skiplock.events.subscriber_jobs', 'invoice.paid')?.value).toBe(2);
    expect(value('skiplock.events.published', 'nobody.listens')).toMatchObject({
      value: 1,
      attributes: { 'skiplock.event.subscribed': false },
    });
  });
});
