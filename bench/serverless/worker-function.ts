import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../adapters/config.js';
import { lambdaStarter } from '../../adapters/lambda-invoke.js';
import type { JobDefinition } from '../../core/jobs.js';
import type { Logger } from '../../core/logger.js';
import { createWorker, type InvocationSummary } from '../../core/worker/index.js';
import type { NeonOptions, SkiplockConnection } from '../../db/connect.js';
import { connectLazily } from '../../db/connect-lazy.js';

/** Connections the benchmark's worker containers open carry this application_name. */
export const INVOCATION_APP = 'skiplock_bench_invocation';

/**
 * The connection string the function's containers use: `connectionString` with INVOCATION_APP as
 * its application_name. The SQL-over-HTTP endpoint keeps a pool per connection string, so this is
 * the one to warm before a neon-http drain.
 */
export function invocationUrl(connectionString: string): string {
  const url = new URL(connectionString);
  url.searchParams.set('application_name', INVOCATION_APP);
  return url.toString();
}

/** A worker log line the benchmark keeps: every fan-out decision, every warning and error. */
export interface LoggedLine {
  level: 'info' | 'warn' | 'error';
  msg: string;
  fields: Record<string, unknown> | undefined;
  at: number;
}

export interface WorkerFunctionOptions {
  /** The function's name: what fan-out invokes, and what the invocations are counted under. */
  functionName: string;
  connectionString: string;
  /** SKIPLOCK_* variables, as the function's environment would set them. */
  env: Record<string, string>;
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs: readonly JobDefinition<any, any>[];
  /** Neon's driver settings (the local SQL-over-HTTP endpoint). */
  neon?: NeonOptions;
  /** The function's timeout: each invocation's remaining time. */
  timeoutMs: number;
}

interface Container {
  db: SkiplockConnection;
}

/**
 * A Lambda worker function as the adapter runs it (adapters/lambda.ts → runWorker), with one
 * difference that matters here: the adapter keeps ONE pool per process (its container), and this
 * process plays all of the function's containers at once. So each concurrent invocation gets a
 * container of its own — a warm idle one when there is one (its pool still open), else a new one
 * (a new pool of SKIPLOCK_POOL_MAX connections) — as Lambda runs one invocation per container.
 * The configuration is the adapter's own (loadConfig over the same variables) and the worker gets
 * the options runWorker passes, fan-out included: asynchronous Invokes of this function through
 * the real SDK (lambdaStarter). Log level: warn and above, plus the fan-out lines (one process
 * writing 20 invocations' per-job info lines would cost this machine's 2 cores, not Lambda's).
 */
export function workerFunction(options: WorkerFunctionOptions) {
  const config = loadConfig({
    ...options.env,
    DATABASE_URL: options.connectionString,
    AWS_LAMBDA_FUNCTION_NAME: options.functionName,
  });
  const url = invocationUrl(options.connectionString);
  const idle: Container[] = [];
  const all: Container[] = [];
  const summaries: InvocationSummary[] = [];
  const lines: LoggedLine[] = [];
  const keep =
    (level: LoggedLine['level']) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      if (level !== 'info' || msg === 'fan_out') lines.push({ level, msg, fields, at: performance.now() });
    };
  const logger: Logger = {
    debug() {},
    info: keep('info'),
    warn: keep('warn'),
    error: keep('error'),
    isEnabled: (level) => level === 'warn' || level === 'error',
  };
  const fanOut = lambdaStarter(options.functionName);

  const handler = async (_event: unknown): Promise<InvocationSummary> => {
    let container = idle.pop();
    if (!container) {
      container = {
        // As the adapter connects (connectLazily): on pg, the pool without a Drizzle database.
        db: await connectLazily({
          connectionString: url,
          driver: config.driver,
          max: config.poolMax,
          statementTimeoutMs: config.statementTimeoutMs,
          queryTimeoutMs: config.queryTimeoutMs,
          neon: options.neon,
        }),
      };
      all.push(container);
    }
    try {
      const summary = await createWorker({
        db: container.db,
        jobs: options.jobs,
        schema: config.schema,
        queues: config.queues,
        concurrency: config.concurrency,
        batchSize: config.batchSize,
        safetyMarginMs: config.safetyMarginMs,
        leaseGraceMs: config.leaseGraceMs,
        completedJobs: config.completedJobs,
        logger,
        name: config.workerName,
        maxInvocations: config.maxInvocations,
        fanOut: config.maxInvocations === undefined ? undefined : fanOut,
        fanOutTargetMs: config.fanOutTargetMs,
      }).runInvocation({ remainingMs: options.timeoutMs, invocationId: randomUUID() });
      summaries.push(summary);
      return summary;
    } finally {
      idle.push(container);
    }
  };

  return {
    handler,
    config,
    summaries,
    lines,
    /** Containers created (each one a cold start with a pool of its own). */
    containers: () => all.length,
    close: async () => {
      await Promise.all(all.map((c) => c.db.close().catch(() => {})));
    },
  };
}

export type WorkerFunction = ReturnType<typeof workerFunction>;
