/**
 * The template's EventBridge schedules, run locally: each function with a `rate(…)` schedule is
 * invoked asynchronously (as EventBridge invokes) with a scheduled event once at start — as the
 * Vercel dev mode runs each cron once — and then every interval. `cron(…)` schedules are reported
 * and skipped: the app uses rates only.
 */
import { randomUUID } from 'node:crypto';
import { parseRate } from '../../cli/cron.js';
import type { LocalLambda, Outcome } from './server.js';
import type { ScheduleSpec } from './template.js';

export interface RunningSchedules {
  /** What runs, one line per schedule, and what was skipped. */
  described: string[];
  stop(): void;
}

/** The event EventBridge sends a scheduled target. */
export function scheduledEvent(functionName: string, region = process.env.AWS_REGION ?? 'us-east-1') {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '000000000000',
    time: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    region,
    resources: [`arn:aws:events:${region}:000000000000:rule/${functionName}-schedule`],
    detail: {},
  };
}

export function startSchedules(
  lambda: LocalLambda,
  schedules: readonly ScheduleSpec[],
  onResult: (functionName: string, outcome: Outcome | 'throttled') => void,
): RunningSchedules {
  const timers: NodeJS.Timeout[] = [];
  const described: string[] = [];
  for (const schedule of schedules) {
    const { functionName, expression } = schedule;
    if (!schedule.enabled) {
      described.push(`${functionName} "${expression}" (disabled)`);
      continue;
    }
    let intervalMs: number;
    try {
      intervalMs = parseRate(expression);
    } catch {
      described.push(`${functionName} "${expression}" (not run: only rate() schedules are emulated)`);
      continue;
    }
    const fire = () =>
      void lambda.invoke(functionName, scheduledEvent(functionName), 'Event').then((o) => onResult(functionName, o));
    fire();
    timers.push(setInterval(fire, intervalMs));
    described.push(`${functionName} "${expression}"`);
  }
  return {
    described,
    stop: () => {
      for (const timer of timers) clearInterval(timer);
    },
  };
}
