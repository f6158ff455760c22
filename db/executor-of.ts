import type { AnyPgDatabase, SkiplockConnection } from './connection-options.js';
import { drizzleExecutor } from './drizzle-executor.js';
import type { Executor } from './executor.js';
import { observed } from './statement-listeners.js';

/**
 * What a caller may give skiplock to run its statements on: a connection from connect(), a Drizzle
 * database or transaction (node-postgres, neon-serverless, neon-http), or an Executor from
 * queryExecutor() over any other client.
 */
export type ExecutorSource = SkiplockConnection | AnyPgDatabase | Executor;

/**
 * The Executor of what a caller passed, the one place it is derived (River's
 * `Driver.UnwrapExecutor`): a connection's own, which runs the hot statements its driver's way; an
 * Executor as it is; a Drizzle database or transaction wrapped, so skiplock's statements join it.
 */
export function executorOf(source: ExecutorSource): Executor {
  if ('executor' in source) return source.executor;
  if ('hot' in source) return source;
  return observed(drizzleExecutor(source), undefined);
}
