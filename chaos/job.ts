import * as z from 'zod';
import { RetryError } from '../base/errors.js';
import { defineJob } from '../core/jobs.js';

export const BEHAVIORS = ['ok', 'throw_once', 'poison', 'hang_once', 'die_in_handler', 'die_after_handler'] as const;
export type Behavior = (typeof BEHAVIORS)[number];

/** How often each behaviour is drawn for a job; the rest are 'ok'. */
export const BEHAVIOR_SHARES: Record<Exclude<Behavior, 'ok'>, number> = {
  throw_once: 0.05,
  poison: 0.01,
  hang_once: 0.02,
  die_in_handler: 0.002,
  die_after_handler: 0.002,
};

export function drawBehavior(random: () => number): Behavior {
  let roll = random();
  for (const [behavior, share] of Object.entries(BEHAVIOR_SHARES)) {
    if (roll < share) return behavior as Behavior;
    roll -= share;
  }
  return 'ok';
}

export const CHAOS_TIMEOUT_MS = 400;
export const CHAOS_MAX_ATTEMPTS = 5;

/**
 * The harness's job kind. Every execution is recorded first (job, lease token, process);
 * then the job behaves as drawn: succeed, throw on its first attempt, always throw (ends in
 * the DLQ), hang past its timeout once, or kill its own process inside the handler or just
 * after it returned (before the completion is written).
 */
export function chaosJob(hooks: {
  record(jobId: string, leaseToken: string, attempt: number): Promise<void>;
  die(): void;
  dieSoon(): void;
}) {
  return defineJob({
    kind: 'chaos',
    payload: z.object({ n: z.number().int(), behavior: z.enum(BEHAVIORS) }),
    timeoutMs: CHAOS_TIMEOUT_MS,
    maxAttempts: CHAOS_MAX_ATTEMPTS,
    backoff: { type: 'constant', delayMs: 50, jitter: 0.5 },
    handler: async ({ behavior }, ctx) => {
      await hooks.record(ctx.id, ctx.leaseToken, ctx.attempt);
      const first = ctx.attempt === 1;
      if (behavior === 'throw_once' && first) throw new RetryError('first attempt fails');
      if (behavior === 'poison') throw new Error('poison: always fails');
      if (behavior === 'hang_once' && first) await new Promise(() => {}); // ignores its signal
      if (behavior === 'die_in_handler' && first) hooks.die();
      if (behavior === 'die_after_handler' && first) hooks.dieSoon();
    },
  });
}

/** The kind a schedule in every worker enqueues each second; each execution is recorded. */
export const SCHEDULED_KIND = 'chaos-scheduled';

export function chaosScheduledJob(record: (occurrence: string, jobId: string) => Promise<void>) {
  return defineJob({
    kind: SCHEDULED_KIND,
    payload: z.object({ at: z.string() }),
    timeoutMs: CHAOS_TIMEOUT_MS,
    handler: async (p, ctx) => record(p.at, ctx.id),
  });
}
