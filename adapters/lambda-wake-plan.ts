import type { InvocationSummary } from '../core/worker/index.js';
import type { SkiplockConfig } from './config.js';
import { functionArn, LambdaWakes, maintenanceSlot, wakeMinute } from './lambda-wake.js';
import type { FunctionRuntime } from './runtime.js';

/**
 * The wake plan of an idle Lambda app (docs/deploy-lambda.md#idle-wake-ups-instead-of-ticks): each
 * worker and maintenance invocation arms the next one-off wake-up it needs, and the fixed schedule
 * only runs them every SKIPLOCK_IDLE_RECHECK_MINUTES as a safety net. Every Lambda invocation
 * queries the database: one that has nothing to do arms nothing, so the next one comes only when
 * something is due.
 */

type WakeSettings = Pick<SkiplockConfig, 'wakeRoleArn' | 'wakeGroup'>;

/**
 * The wake-ups of one handler of a warm instance (one LambdaWakes per role and group: its memory of
 * what it armed, its one failure line). `now`: a test's wall time.
 */
export function instanceWakes(now?: () => Date) {
  let current: { key: string; wakes: LambdaWakes } | undefined;
  return (runtime: FunctionRuntime, config: WakeSettings): LambdaWakes => {
    const key = JSON.stringify([config.wakeRoleArn ?? null, config.wakeGroup ?? null]);
    if (current?.key !== key) {
      const wakes = new LambdaWakes({
        roleArn: config.wakeRoleArn ?? '',
        group: config.wakeGroup,
        logger: runtime.logger,
        now: now && (() => now().getTime()),
      });
      current = { key, wakes };
    }
    return current.wakes;
  };
}

type WakesOf = ReturnType<typeof instanceWakes>;

/** Where this function wakes itself, or undefined (said once) when it cannot arm wake-ups. */
function ownTarget(wakes: LambdaWakes, config: WakeSettings, invokedFunctionArn: string | undefined) {
  if (!config.wakeRoleArn) {
    wakes.unavailable('SKIPLOCK_WAKE_ROLE_ARN is unset, so no one-off wake-up can be armed');
    return undefined;
  }
  if (!invokedFunctionArn) wakes.unavailable('the Lambda context has no invokedFunctionArn to wake');
  return invokedFunctionArn;
}

/**
 * After a worker invocation: it did work, failed or found work held back (`nextDueAt` absent or
 * due within a minute) → wake again at the next whole minute, as the per-minute tick did; due
 * later → wake then; nothing due (`null`) → no wake. A worker that did work also wakes maintenance
 * (SKIPLOCK_MAINTENANCE_FUNCTION) in its next 10-minute slot.
 */
export async function wakeAfterWorker(
  runtime: FunctionRuntime,
  wakesOf: WakesOf,
  context: { invokedFunctionArn?: string },
  summary: InvocationSummary,
): Promise<void> {
  const config = runtime.settings.require('worker');
  if (!config.idle) return;
  const wakes = wakesOf(runtime, config);
  const self = ownTarget(wakes, config, context.invokedFunctionArn);
  if (!self) return;
  const now = wakes.now();
  const arms: Promise<void>[] = [];
  if (summary.nextDueAt !== null) arms.push(wakes.arm(self, wakeMinute(summary.nextDueAt ?? null, now)));
  if (summary.claimed > 0 && config.maintenanceFunction) {
    const maintenance = functionArn(config.maintenanceFunction, self);
    if (maintenance) arms.push(wakes.arm(maintenance, maintenanceSlot(now)));
  }
  await Promise.all(arms);
}

/** After maintenance: a quiet tick sleeps (until a busy worker or the recheck); else its next slot. */
export async function wakeAfterMaintenance(
  runtime: FunctionRuntime,
  wakesOf: WakesOf,
  context: { invokedFunctionArn?: string },
  quiet: boolean,
): Promise<void> {
  const config = runtime.settings.require('maintenance');
  if (!config.idle || quiet) return;
  const wakes = wakesOf(runtime, config);
  const self = ownTarget(wakes, config, context.invokedFunctionArn);
  if (self) await wakes.arm(self, maintenanceSlot(wakes.now()));
}
