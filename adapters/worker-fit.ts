import { ConfigError } from '../base/errors.js';
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
  selection: { kinds?: readonly string[]; queues?: readonly string[]; slowQueues?: readonly string[] },
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
    slowQueues: selection.slowQueues,
  });
}

/** The least CPU time per request a worker invocation can run in; a platform's limit below it is refused. */
export const MIN_CPU_MS = 1_000;

/**
 * An invocation's budget within the platform's CPU time per request (`cpuMs`): CPU time never
 * exceeds wall time in a single-threaded isolate, so a wall-time budget within the CPU limit bounds
 * both — the worker stops claiming before either runs out. A limit under MIN_CPU_MS cannot run a
 * worker and is a ConfigError, `hint` saying what the platform allows.
 */
export function withinCpuLimit(budgetMs: number, cpuMs: number, hint: string): number {
  if (!(cpuMs >= MIN_CPU_MS)) {
    throw new ConfigError(
      `cpuMs ${cpuMs} is too little CPU time to run a worker invocation (at least ${MIN_CPU_MS}; ${hint})`,
    );
  }
  return Math.min(budgetMs, cpuMs);
}
