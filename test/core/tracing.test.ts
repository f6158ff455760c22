import { context, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaEnqueue, createLambdaWorker } from '../../adapters/lambda.js';
import { otelTracing } from '../../adapters/otel.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { DiscardError } from '../../base/errors.js';
import { defineBatchJob } from '../../core/batches.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { httpApiEvent, lambdaContext, scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('core-tracing', (ctx) => {
  t = ctx;
});

// The SDK's in-memory exporter: every ended span, as an exporter would send it.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('test');
const contextManager = new AsyncLocalStorageContextManager();
beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
});
afterAll(() => {
  contextManager.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

const spans = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);
const one = (name: string) => {
  const found = spans(name);
  expect(found, name).toHaveLength(1);
  return found[0] as ReadableSpan;
};

describe(`OpenTelemetry traces from enqueue to execution (${testDriver()})`, () => {
  it("a batch handler call has its own span, linked to each job's enqueue; each job's attempt span is its child", async () => {
    const bulk = defineBatchJob({
      kind: 'bulk-index',
      queue: 'indexing',
      payload: z.object({ doc: z.number() }),
      batch: { size: 10 },
      timeoutMs: 2_000,
      handler: (jobs) => jobs.map((j) => (j.payload.doc === 2 ? j.retry(new Error('shard busy')) : j.done())),
    });
    const enqueuer = createEnqueuer({ schema: t.schema, tracing: otelTracing({ tracer }) });
    await tracer.startActiveSpan('POST /docs', async (span) => {
      await enqueuer.enqueueMany(t.db, [bulk.with({ doc: 1 }), bulk.with({ doc: 2 }), bulk.with({ doc: 3 })]);
      span.end();
    });
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [bulk],
      logger: silentLogger,
      tracing: otelTracing({ tracer }),
    }).runInvocation({ remainingMs: 30_000 });
    const processed = spans('process indexing');
    const batch = processed.find((s) => s.attributes['messaging.batch.message_count'] === 3) as ReadableSpan;
    expect(batch).toBeDefined();
    expect(batch.attributes['skiplock.batch.outcome']).toBe('completed');
    const send = one('send indexing');
    expect(batch.links.map((l) => l.context.spanId)).toEqual([
      send.spanContext().spanId,
      send.spanContext().spanId,
      send.spanContext().spanId,
    ]);
    const attempts = processed.filter((s) => s !== batch);
    expect(attempts).toHaveLength(3);
    for (const a of attempts) expect(a.parentSpanContext?.spanId).toBe(batch.spanContext().spanId);
    expect(attempts.map((a) => a.attributes['skiplock.job.outcome']).sort()).toEqual([
      'completed',
      'completed',
      'retry',
    ]);
  });

  it("an enqueue inside a traced request and the job's attempt in a later invocation are linked", async () => {
    const sendWelcome = defineJob({
      kind: 'send-welcome',
      queue: 'emails',
      payload: z.object({ to: z.string() }),
      handler: async () => {
        // The handler's own span nests under the attempt's.
        await tracer.startActiveSpan('smtp call', async (span) => span.end());
      },
    });
    const enqueuer = createEnqueuer({ schema: t.schema, tracing: otelTracing({ tracer }) });
    const { id } = await tracer.startActiveSpan('POST /signup', { kind: SpanKind.SERVER }, async (span) => {
      try {
        return await enqueuer.enqueue(t.db, sendWelcome, { to: 'ada@example.com' });
      } finally {
        span.end();
      }
    });
    const request = one('POST /signup');
    const send = one('send emails');
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(send.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(send.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'skiplock',
      'messaging.operation.type': 'send',
      'messaging.destination.name': 'emails',
      'messaging.message.id': id,
      'skiplock.job.kind': 'send-welcome',
    });
    // The job carries the producer span's context.
    const { rows } = await t.admin.query(`select trace_context from "${t.schema}".jobs where id = $1`, [id]);
    expect(rows[0].trace_context.traceparent).toBe(`00-${send.spanContext().traceId}-${send.spanContext().spanId}-01`);

    // Later, in another invocation (its own trace, as a Lambda invocation has).
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [sendWelcome],
      logger: silentLogger,
      tracing: otelTracing({ tracer }),
    });
    await tracer.startActiveSpan('lambda invocation', async (span) => {
      await worker.runInvocation({ remainingMs: 60_000 });
      span.end();
    });
    const invocation = one('lambda invocation');
    const process = one('process emails');
    expect(process.kind).toBe(SpanKind.CONSUMER);
    expect(process.parentSpanContext?.spanId).toBe(invocation.spanContext().spanId);
    expect(process.links.map((l) => l.context.spanId)).toEqual([send.spanContext().spanId]);
    expect(process.links[0]?.context.traceId).toBe(request.spanContext().traceId);
    expect(process.attributes).toMatchObject({
      'messaging.operation.type': 'process',
      'messaging.destination.name': 'emails',
      'messaging.message.id': id,
      'skiplock.job.attempt': 1,
      'skiplock.job.outcome': 'completed',
    });
    expect(process.status.code).toBe(SpanStatusCode.UNSET);
    expect(one('smtp call').parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    const receives = spans('receive').filter((s) => s.attributes['messaging.batch.message_count'] === 1);
    expect(receives).toHaveLength(1);
    expect(receives[0]?.parentSpanContext?.spanId).toBe(invocation.spanContext().spanId);
  });

  it('a failed attempt records its outcome and error; its retry, in another invocation, links to the same enqueue', async () => {
    let calls = 0;
    const flaky = defineJob({
      kind: 'flaky',
      payload: z.object({}),
      maxAttempts: 2,
      backoff: { type: 'constant', delayMs: 0, jitter: 0 },
      handler: () => {
        calls++;
        if (calls === 1) throw new Error('partner timed out');
        throw new DiscardError('partner said no');
      },
    });
    const tracing = otelTracing({ tracer });
    await createEnqueuer({ schema: t.schema, tracing }).enqueue(t.db, flaky, {});
    const send = one('send default');
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [flaky], logger: silentLogger, tracing });
    await worker.runInvocation({ remainingMs: 60_000 });
    await worker.runInvocation({ remainingMs: 60_000 });
    const attempts = spans('process default');
    expect(attempts.map((s) => [s.attributes['skiplock.job.attempt'], s.attributes['skiplock.job.outcome']])).toEqual([
      [1, 'retry'],
      [2, 'dead'],
    ]);
    for (const attempt of attempts) {
      expect(attempt.status.code).toBe(SpanStatusCode.ERROR);
      expect(attempt.links[0]?.context.spanId).toBe(send.spanContext().spanId);
    }
    expect(attempts[0]?.events.map((e) => [e.name, e.attributes?.['exception.message']])).toEqual([
      ['exception', 'partner timed out'],
    ]);
    expect(attempts[1]?.status.message).toBe('partner said no');
  });

  it('the Lambda enqueue function and worker pass their tracing through: the attempt links to the HTTP enqueue', async () => {
    const ping = defineJob({
      kind: 'ping',
      queue: 'pings',
      payload: z.object({}),
      timeoutMs: 1_000,
      handler: () => {},
    });
    const token = 'enqueue-token-0123456789abcdef';
    const env = {
      DATABASE_URL: databaseUrl(),
      SKIPLOCK_DRIVER: testDriver(),
      SKIPLOCK_SCHEMA: t.schema,
      SKIPLOCK_ENQUEUE_TOKEN: token,
      SKIPLOCK_LOG_LEVEL: 'error',
    };
    const tracing = otelTracing({ tracer });
    try {
      const response = (await createLambdaEnqueue([ping], { env, tracing })(
        httpApiEvent({
          headers: { authorization: `Bearer ${token}` },
          body: JSON.stringify({ kind: 'ping', payload: {} }),
        }),
      )) as { statusCode: number };
      expect(response.statusCode).toBe(200);
      await createLambdaWorker([ping], { env, tracing, fanOut: false })(scheduledEvent(), lambdaContext(20_000));
    } finally {
      resetSharedRuntime();
    }
    const send = one('send pings');
    expect(one('process pings').links[0]?.context.spanId).toBe(send.spanContext().spanId);
  });

  it('without tracing nothing is stored with the job; a flow traces as one send, each step linked to it', async () => {
    const step = defineJob({ kind: 'step', payload: z.object({ n: z.number() }), handler: () => {} });
    const [plain] = await createEnqueuer({ schema: t.schema }).enqueueMany(t.db, [step.with({ n: 0 })]);
    const { rows } = await t.admin.query(`select trace_context from "${t.schema}".jobs where id = $1`, [plain?.id]);
    expect(rows[0].trace_context).toBeNull();
    expect(exporter.getFinishedSpans()).toEqual([]);
    const tracing = otelTracing({ tracer });
    await createEnqueuer({ schema: t.schema, tracing }).enqueueFlow(t.db, {
      a: step.with({ n: 1 }),
      b: step.with({ n: 2 }, { after: ['a'] }),
    });
    const send = one('send default');
    expect(send.attributes['messaging.batch.message_count']).toBe(2);
    await createWorker({ db: t.db, schema: t.schema, jobs: [step], logger: silentLogger, tracing }).runInvocation({
      remainingMs: 60_000,
    });
    const processed = spans('process default');
    expect(processed).toHaveLength(3);
    const linked = processed.filter((s) => s.links[0]?.context.spanId === send.spanContext().spanId);
    expect(linked).toHaveLength(2);
    // Outside any active span each attempt is the root of its own trace, still linked.
    for (const span of processed) expect(span.parentSpanContext).toBeUndefined();
  });
  it('each durable step the attempt runs gets a span under its process span; a stored step gets none', async () => {
    let fail = true;
    const stepped = defineJob({
      kind: 'stepped',
      payload: z.object({}),
      backoff: { type: 'constant', delayMs: 0, jitter: 0 },
      handler: async (_p, ctx) => {
        await ctx.step('collect', () => 3);
        await ctx.step('send', () => {
          if (fail) {
            fail = false;
            throw new Error('smtp 421');
          }
          return 'sent';
        });
      },
    });
    const tracing = otelTracing({ tracer });
    await createEnqueuer({ schema: t.schema }).enqueue(t.db, stepped, {});
    // The step's retry (its own attempts, no backoff) runs in the same invocation.
    await createWorker({ db: t.db, schema: t.schema, jobs: [stepped], logger: silentLogger, tracing }).runInvocation({
      remainingMs: 60_000,
    });
    const processes = spans('process default');
    expect(processes.map((p) => p.attributes['skiplock.job.outcome'])).toEqual(['suspended', 'completed']);
    expect(spans('step collect')).toHaveLength(1);
    const sends = spans('step send');
    expect(sends.map((s) => [s.attributes['skiplock.step.attempt'], s.status.code])).toEqual([
      [1, SpanStatusCode.ERROR],
      [2, SpanStatusCode.UNSET],
    ]);
    expect(sends[0]?.parentSpanContext?.spanId).toBe(processes[0]?.spanContext().spanId);
    expect(sends[1]?.parentSpanContext?.spanId).toBe(processes[1]?.spanContext().spanId);
    expect(one('step collect').attributes).toMatchObject({
      'skiplock.step.position': 0,
      'skiplock.step.name': 'collect',
    });
  });
});
