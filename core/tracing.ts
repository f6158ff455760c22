/**
 * Tracing hooks: the core calls them around an enqueue, a claim and each attempt, and stores what
 * the enqueue's hook hands it with each job. `otelTracing()` from `skiplock/otel` implements them
 * with OpenTelemetry's API (spans after its messaging conventions); the core itself imports no
 * tracing library, and without a `tracing` option none of this runs.
 */

/** A job's trace context as stored with it: W3C `traceparent` (and `tracestate`), as propagators write them. */
export type TraceCarrier = Record<string, string>;

/** How one attempt ended, as its span records it. */
export type AttemptTraceOutcome = 'completed' | 'retry' | 'dead' | 'cancelled' | 'lease_lost' | 'suspended';

export interface Tracing {
  /**
   * Runs `write` (the enqueue statement) inside a producer span for `jobs`. `write` gets the trace
   * context to store with each of them (the span's own: each attempt links back to it), or null when
   * there is nothing to record. `ids` reads the jobs' ids from what `write` returned.
   */
  enqueue<T>(
    jobs: readonly { kind: string; queue: string }[],
    write: (carrier: TraceCarrier | null) => Promise<T>,
    ids: (result: T) => readonly (string | null)[],
  ): Promise<T>;
  /**
   * Runs `write` (a publish statement) inside a producer span for the event `name`; `write` gets the
   * trace context to store with the subscribers' jobs. `jobs` reads what it wrote. Optional: without
   * it a publish is not traced.
   */
  publish?<T>(
    name: string,
    write: (carrier: TraceCarrier | null) => Promise<T>,
    jobs: (result: T) => readonly { id: string; kind: string; queue: string }[],
  ): Promise<T>;
  /** Runs `claim` (one claim statement) inside a span; `count` reads how many jobs it took. */
  claim<T>(queues: readonly string[] | undefined, claim: () => Promise<T>, count: (result: T) => number): Promise<T>;
  /** Starts the span of one attempt, linked to the context its job was enqueued under. */
  attempt(job: AttemptTraceJob): AttemptTrace;
  /**
   * Starts the span of one batch handler call (a batch kind), linked to the context each of its
   * jobs was enqueued under. Each job's attempt span starts inside its `run`, as a child. Optional:
   * without it, a batch's jobs get their attempt spans only. Its outcome is `completed` when the
   * handler answered, `retry` (with the error) when it threw.
   */
  batch?(jobs: readonly AttemptTraceJob[]): AttemptTrace;
}

export interface AttemptTraceJob {
  id: string;
  kind: string;
  queue: string;
  attempt: number;
  traceContext?: TraceCarrier;
}

export interface AttemptTrace {
  /** Calls the handler with the attempt's span as the active one (its own spans nest under it). */
  run<T>(fn: () => T): T;
  /** Ends the span with the attempt's outcome, and the error when it failed. Called once. */
  end(outcome: AttemptTraceOutcome, error?: unknown): void;
  /**
   * Runs one durable step's function (`ctx.step`) in a span of its own, a child of the attempt's;
   * a step that returns its stored result runs nothing and gets none.
   */
  step?<T>(step: { name: string; position: number; attempt: number }, fn: () => Promise<T>): Promise<T>;
}
