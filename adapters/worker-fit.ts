import type { JobDefinition } from '../core/jobs.js';
import { assertKindsFit } from '../core/worker/deadline.js';
import { EnvironmentSettings, type SkiplockConfig } from './config.js';

/**
 * Refuses, as a deployed worker is made, a kind that would never run in its invocations: their
 * length (`invocationMs` of the configuration: Vercel's maxDuration, or a Lambda's `invocationMs`
 * option) is known before any invocation starts, and so are the environment's safety margin, kinds
 * and queues. A ConfigError thrown here stops the module from loading — in the app's own tests, in
 * a build that evaluates it, or at the function's first start — instead of letting invocations
 * claim nothing.
 * A bad variable is left to the first request, which reports every problem of the configuration.
 */
export function refuseUnfitKinds(
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs: readonly JobDefinition<any, any>[],
  env: Record<string, string | undefined>,
  selection: { kinds?: readonly string[]; queues?: readonly string[] },
  invocationMs: (config: SkiplockConfig) => number | undefined,
): void {
  const settings = new EnvironmentSettings(env);
  if (settings.problems('worker').length > 0) return;
  const config = settings.require('worker');
  const ms = invocationMs(config);
  if (ms === undefined) return;
  const kinds = selection.kinds ?? config.kinds;
  assertKindsFit(kinds ? jobs.filter((j) => kinds.includes(j.kind)) : jobs, {
    invocationMs: ms,
    safetyMarginMs: config.safetyMarginMs,
    queues: selection.queues ?? config.queues,
  });
}
