/**
 * `skiplock/otel`: tracing with OpenTelemetry's API (`@opentelemetry/api`, an optional peer
 * dependency; your SDK exports the spans). Spans follow OpenTelemetry's messaging conventions:
 * - `send <queue>` (PRODUCER) around each enqueue call; its context is stored with each job;
 * - `publish <event>` (PRODUCER) around each publish; its context is stored with each subscriber's job;
 * - `receive <queue>` (CLIENT) around each claim, with the number of jobs it took;
 * - `process <queue>` (CONSUMER) around each attempt, a child of whatever is active in the
 *   invocation (your Lambda or route span) and LINKED to its job's `send` span — the enqueuing
 *   request's trace reaches the attempt however long the job waited — with the outcome, and the
 *   error when it failed. The handler runs inside it: its own spans nest under it.
 * Metrics (`otelMetrics()`, with OpenTelemetry's metrics API; your SDK's reader exports them):
 * attempts started and ended by queue, kind and outcome, their durations, rate waits, breaker
 * transitions, invocations, and the queue depth each maintenance tick reads.
 * - `step <name>` (INTERNAL) around each durable step the attempt runs (`ctx.step`), a child of its
 *   `process` span, with the step's position and attempt; a step that returns its stored result
 *   runs nothing and gets no span.
 */
import {
  type Attributes,
  context,
  type Link,
  type Meter,
  metrics,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { BreakerState } from '../base/outcomes.js';
import type { QueueStatsRow } from '../base/rows.js';
import type { EventMetrics, JobMetrics, MeteredJob, QueueMetrics } from '../core/metrics.js';
import type { AttemptTrace, AttemptTraceOutcome, TraceCarrier, Tracing } from '../core/tracing.js';

export interface OtelTracingOptions {
  /** @defaultValue `trace.getTracer('skiplock')` from the global provider your SDK registered */
  tracer?: Tracer;
}

const SYSTEM = { 'messaging.system': 'skiplock' } as const;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Tracing hooks for createWorker({ tracing }) and createEnqueuer({ tracing }), with OpenTelemetry. */
export function otelTracing(options: OtelTracingOptions = {}): Tracing {
  const tracer = () => options.tracer ?? trace.getTracer('skiplock');
  return {
    enqueue: (jobs, write, ids) => {
      const queue = onlyOne(jobs.map((j) => j.queue));
      const kind = onlyOne(jobs.map((j) => j.kind));
      const attributes: Attributes = {
        ...SYSTEM,
        'messaging.operation.name': 'send',
        'messaging.operation.type': 'send',
        ...(queue === undefined ? {} : { 'messaging.destination.name': queue }),
        ...(kind === undefined ? {} : { 'skiplock.job.kind': kind }),
        ...(jobs.length > 1 ? { 'messaging.batch.message_count': jobs.length } : {}),
      };
      return tracer().startActiveSpan(
        queue === undefined ? 'send' : `send ${queue}`,
        { kind: SpanKind.PRODUCER, attributes },
        (span) =>
          ended(
            span,
            () => write(carrierOf(span.spanContext())),
            (result) => {
              const written = ids(result);
              if (written.length === 1 && written[0]) span.setAttribute('messaging.message.id', written[0]);
            },
          ),
      );
    },
    publish: (name, write, jobs) =>
      tracer().startActiveSpan(
        `publish ${name}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: {
            ...SYSTEM,
            'messaging.operation.name': 'publish',
            'messaging.operation.type': 'send',
            'messaging.destination.name': name,
          },
        },
        (span) =>
          ended(
            span,
            () => write(carrierOf(span.spanContext())),
            (result) => span.setAttribute('messaging.batch.message_count', jobs(result).length),
          ),
      ),
    claim: (queues, claim, count) => {
      const queue = queues?.length === 1 ? queues[0] : undefined;
      return tracer().startActiveSpan(
        queue === undefined ? 'receive' : `receive ${queue}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            ...SYSTEM,
            'messaging.operation.name': 'receive',
            'messaging.operation.type': 'receive',
            ...(queue === undefined ? {} : { 'messaging.destination.name': queue }),
          },
        },
        (span) => ended(span, claim, (result) => span.setAttribute('messaging.batch.message_count', count(result))),
      );
    },
    attempt: (job): AttemptTrace => {
      const link = spanContextOf(job.traceContext);
      const links: Link[] = link ? [{ context: link }] : [];
      const span = tracer().startSpan(
        `process ${job.queue}`,
        {
          kind: SpanKind.CONSUMER,
          links,
          attributes: {
            ...SYSTEM,
            'messaging.operation.name': 'process',
            'messaging.operation.type': 'process',
            'messaging.destination.name': job.queue,
            'messaging.message.id': job.id,
            'skiplock.job.kind': job.kind,
            'skiplock.job.attempt': job.attempt,
          },
        },
        context.active(),
      );
      const active = trace.setSpan(context.active(), span);
      return {
        run: (fn) => context.with(active, fn),
        step: (step, fn) =>
          tracer().startActiveSpan(
            `step ${step.name}`,
            {
              kind: SpanKind.INTERNAL,
              attributes: {
                ...SYSTEM,
                'messaging.message.id': job.id,
                'skiplock.step.name': step.name,
                'skiplock.step.position': step.position,
                'skiplock.step.attempt': step.attempt,
              },
            },
            active,
            (stepSpan) => ended(stepSpan, fn, () => {}),
          ),
        end: (outcome: AttemptTraceOutcome, error?: unknown) => {
          span.setAttribute('skiplock.job.outcome', outcome);
          if (error !== undefined) failed(span, error);
          else if (outcome !== 'completed' && outcome !== 'suspended')
            span.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
          span.end();
        },
      };
    },
    // A batch handler call: one span linked to each job's enqueue; the jobs' attempt spans start
    // inside its run(), as its children.
    batch: (jobs): AttemptTrace => {
      const links: Link[] = [];
      for (const job of jobs) {
        const link = spanContextOf(job.traceContext);
        if (link) links.push({ context: link, attributes: { 'messaging.message.id': job.id } });
      }
      const first = jobs[0];
      const queue = first?.queue ?? 'default';
      const span = tracer().startSpan(
        `process ${queue}`,
        {
          kind: SpanKind.CONSUMER,
          links,
          attributes: {
            ...SYSTEM,
            'messaging.operation.name': 'process',
            'messaging.operation.type': 'process',
            'messaging.destination.name': queue,
            'messaging.batch.message_count': jobs.length,
            ...(first ? { 'skiplock.job.kind': first.kind } : {}),
          },
        },
        context.active(),
      );
      const active = trace.setSpan(context.active(), span);
      return {
        run: (fn) => context.with(active, fn),
        end: (outcome: AttemptTraceOutcome, error?: unknown) => {
          span.setAttribute('skiplock.batch.outcome', outcome);
          if (error !== undefined) failed(span, error);
          span.end();
        },
      };
    },
  };
}

export interface OtelMetricsOptions {
  /** @defaultValue `metrics.getMeter('skiplock')` from the global provider your SDK registered */
  meter?: Meter;
}

const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half_open'];

/**
 * Metrics hooks for createWorker({ metrics }) (and the Lambda and Vercel workers' `metrics`) and
 * for the maintenance functions' `metrics` (queue depth), with OpenTelemetry:
 *
 * | instrument | kind, unit | attributes |
 * | --- | --- | --- |
 * | `skiplock.jobs.started` | counter | `messaging.destination.name` (queue), `skiplock.job.kind` |
 * | `skiplock.jobs.ended` | counter | queue, kind, `skiplock.job.outcome` (completed, retry, dead, cancelled, suspended, lease_lost) |
 * | `skiplock.attempt.duration` | histogram, ms | queue, kind, outcome |
 * | `skiplock.rate_limit.wait` | counter, ms | — |
 * | `skiplock.breaker.transitions` | counter | `skiplock.destination`, `skiplock.breaker.from`, `skiplock.breaker.to` |
 * | `skiplock.invocations` | counter | `skiplock.invocation.stopped_because` |
 * | `skiplock.invocation.duration` | histogram, ms | `skiplock.invocation.stopped_because` |
 * | `skiplock.queue.ready`, `.running`, `.dead`, `.sleeping` | gauges, jobs | queue, kind (the last maintenance tick's) |
 * | `skiplock.queue.oldest_ready_age` | gauge, s | queue, kind |
 * | `skiplock.breaker.state` | gauge, 1 for the breaker's state and 0 for the others | `skiplock.destination`, `skiplock.breaker.state` (closed, open, half_open) |
 */
export function otelMetrics(options: OtelMetricsOptions = {}): JobMetrics & QueueMetrics & EventMetrics {
  const meter = options.meter ?? metrics.getMeter('skiplock');
  const published = meter.createCounter('skiplock.events.published', {
    description: 'events published, by name and whether any subscriber listened',
  });
  const subscriberJobs = meter.createCounter('skiplock.events.subscriber_jobs', {
    description: 'jobs written for subscribers by publishes',
  });
  const started = meter.createCounter('skiplock.jobs.started', { description: 'attempts started' });
  const ended = meter.createCounter('skiplock.jobs.ended', { description: 'attempts ended, by outcome' });
  const duration = meter.createHistogram('skiplock.attempt.duration', { unit: 'ms', description: 'attempt durations' });
  const rateWait = meter.createCounter('skiplock.rate_limit.wait', {
    unit: 'ms',
    description: 'time spent waiting for a rate limit',
  });
  const breakers = meter.createCounter('skiplock.breaker.transitions', { description: 'circuit breaker moves' });
  const invocations = meter.createCounter('skiplock.invocations', {
    description: 'worker invocations, by why they stopped',
  });
  const invocationDuration = meter.createHistogram('skiplock.invocation.duration', { unit: 'ms' });
  // The last maintenance tick's depth, reported at each collection.
  let depth: readonly QueueStatsRow[] = [];
  const gauge = (name: string, unit: string, value: (row: QueueStatsRow) => number | null) =>
    meter.createObservableGauge(name, { unit }).addCallback((result) => {
      for (const row of depth) {
        const v = value(row);
        if (v !== null) result.observe(v, jobAttributes(row));
      }
    });
  gauge('skiplock.queue.ready', '{job}', (r) => r.ready);
  gauge('skiplock.queue.running', '{job}', (r) => r.running);
  gauge('skiplock.queue.dead', '{job}', (r) => r.dead);
  gauge('skiplock.queue.sleeping', '{job}', (r) => r.sleeping + r.waitingForSignal);
  gauge('skiplock.queue.oldest_ready_age', 's', (r) => r.oldestReadyAgeSeconds);
  // The last tick's breakers: one series per destination and state, 1 for the state it is in.
  let breakerStates: readonly { name: string; state: BreakerState }[] = [];
  meter
    .createObservableGauge('skiplock.breaker.state', { description: 'circuit breaker state' })
    .addCallback((result) => {
      for (const { name, state } of breakerStates) {
        for (const s of BREAKER_STATES) {
          result.observe(s === state ? 1 : 0, { 'skiplock.destination': name, 'skiplock.breaker.state': s });
        }
      }
    });
  return {
    started: (job) => started.add(1, jobAttributes(job)),
    ended: (job, outcome, ms) => {
      const attributes = { ...jobAttributes(job), 'skiplock.job.outcome': outcome };
      ended.add(1, attributes);
      duration.record(ms, attributes);
    },
    rateWaited: (ms) => rateWait.add(ms),
    breakerMoved: (destination, from, to) =>
      breakers.add(1, {
        'skiplock.destination': destination,
        'skiplock.breaker.from': from,
        'skiplock.breaker.to': to,
      }),
    invocationEnded: (stoppedBecause, ms) => {
      invocations.add(1, { 'skiplock.invocation.stopped_because': stoppedBecause });
      invocationDuration.record(ms, { 'skiplock.invocation.stopped_because': stoppedBecause });
    },
    queues: (rows) => {
      depth = rows;
    },
    breakers: (rows) => {
      breakerStates = rows;
    },
    published: (event) => {
      if (event.duplicate) return;
      const attributes = {
        ...SYSTEM,
        'skiplock.event.name': event.name,
        'skiplock.event.subscribed': event.subscribers > 0,
      };
      published.add(1, attributes);
      subscriberJobs.add(event.jobs, attributes);
    },
  };
}

function jobAttributes(job: MeteredJob): Attributes {
  return { ...SYSTEM, 'messaging.destination.name': job.queue, 'skiplock.job.kind': job.kind };
}

/** The W3C trace context of `span`, as stored with a job; null when it is not a recording one. */
function carrierOf(span: SpanContext): TraceCarrier | null {
  if (!trace.isSpanContextValid(span)) return null;
  const carrier: TraceCarrier = {
    traceparent: `00-${span.traceId}-${span.spanId}-${span.traceFlags.toString(16).padStart(2, '0')}`,
  };
  const state = span.traceState?.serialize();
  if (state) carrier.tracestate = state;
  return carrier;
}

/** The span context a job's stored carrier names, or undefined (none, or not W3C). */
function spanContextOf(carrier: TraceCarrier | undefined): SpanContext | undefined {
  const match = carrier?.traceparent ? TRACEPARENT.exec(carrier.traceparent) : null;
  if (!match) return undefined;
  const [, traceId = '', spanId = '', flags = '00'] = match;
  const context: SpanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
  return trace.isSpanContextValid(context) ? context : undefined;
}

/** Runs `work` in `span` and ends it: `done` records what it returned; a throw is recorded and rethrown. */
async function ended<T>(span: Span, work: () => Promise<T>, done: (result: T) => void): Promise<T> {
  try {
    const result = await work();
    done(result);
    return result;
  } catch (err) {
    failed(span, err);
    throw err;
  } finally {
    span.end();
  }
}

function failed(span: Span, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}

function onlyOne(values: readonly string[]): string | undefined {
  const first = values[0];
  return values.every((v) => v === first) ? first : undefined;
}
