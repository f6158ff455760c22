import * as z from 'zod/mini';
import { type BreakerState, breakers, type DestinationHealth, resetBreaker } from '../../core/breakers.js';
import {
  clearLimit,
  type LimitOverride,
  type LimitTarget,
  limits,
  type Pause,
  pause,
  pauses,
  resume,
  setLimit,
} from '../../core/controls.js';
import { check, describeIssues } from '../../core/issues.js';
import {
  clearRateLimit,
  type RateLimitOverride,
  type RateLimitTarget,
  type RateUse,
  rateLimits,
  setRateLimit,
} from '../../core/rate-limits.js';
import type { FunctionRuntime } from '../runtime.js';
import { HttpError } from './http.js';

/**
 * The control function's body: flow control an operator changes on a deployed app — pauses,
 * concurrency limits, circuit breakers, rate limits. One action per request.
 */
const maxText = (max: number) => z.optional(z.string().check(z.maxLength(max)));
const whole = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));
const target = { queue: z.optional(z.string()), kind: z.optional(z.string()) };
const rateTarget = { ...target, destination: z.optional(z.string()), perKey: z.optional(z.boolean()) };
export const controlBodySchema = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('pause'), ...target, reason: maxText(1000), by: maxText(255) }),
  z.strictObject({ action: z.literal('resume'), ...target, by: maxText(255) }),
  z.strictObject({ action: z.literal('list') }),
  z.strictObject({
    action: z.literal('limit'),
    ...target,
    perKey: z.optional(z.boolean()),
    maxRunning: whole(1, 100_000),
    reason: maxText(1000),
    by: maxText(255),
  }),
  z.strictObject({ action: z.literal('unlimit'), ...target, perKey: z.optional(z.boolean()), by: maxText(255) }),
  z.strictObject({ action: z.literal('limits') }),
  z.strictObject({ action: z.literal('breakers') }),
  z.strictObject({ action: z.literal('rate_limits') }),
  z.strictObject({
    action: z.literal('set_rate_limit'),
    ...rateTarget,
    limit: whole(1, 100_000),
    periodMs: z.optional(whole(1_000, 86_400_000)),
    reason: maxText(1000),
    by: maxText(255),
  }),
  z.strictObject({ action: z.literal('clear_rate_limit'), ...rateTarget, by: maxText(255) }),
  z.strictObject({
    action: z.literal('reset_breaker'),
    destination: z.string().check(z.minLength(1), z.maxLength(200)),
    by: maxText(255),
  }),
]);

export type ControlResult =
  | { action: 'pause'; paused: Pause; changed: boolean }
  | { action: 'resume'; resumed: boolean; pause: Pause | null }
  | { action: 'list'; paused: Pause[] }
  | { action: 'limit'; limit: LimitOverride; previous: number | null }
  | { action: 'unlimit'; cleared: boolean; limit: LimitOverride | null }
  | { action: 'limits'; limits: (LimitOverride & { running: number; busiestKey: string | null })[] }
  | { action: 'breakers'; breakers: DestinationHealth[] }
  | { action: 'reset_breaker'; destination: string; previous: BreakerState | null }
  | { action: 'rate_limits'; rateLimits: RateLimitOverride[]; use: RateUse[] }
  | {
      action: 'set_rate_limit';
      rateLimit: RateLimitOverride;
      previous: { maxStarts: number; periodMs: number } | null;
    }
  | { action: 'clear_rate_limit'; cleared: boolean; rateLimit: RateLimitOverride | null };

/**
 * Validates a control body and applies it; each change is logged with who made it
 * (`queue_paused` / `queue_resumed`, or `kind_…`). `by` defaults to the caller's label.
 */
export async function controlFromBody(
  runtime: FunctionRuntime,
  body: unknown,
  defaultBy: string,
): Promise<ControlResult> {
  const parsed = check(controlBodySchema, body);
  if (!parsed.success) {
    throw new HttpError(400, 'invalid_request', `invalid request: ${describeIssues(parsed.error, 'body')}`);
  }
  const input = parsed.data;
  const { schema } = runtime.settings.require('database');
  const { logger } = runtime;
  if (input.action === 'list') return { action: 'list', paused: await runtime.withDb((db) => pauses(db, { schema })) };
  if (input.action === 'limits')
    return { action: 'limits', limits: await runtime.withDb((db) => limits(db, { schema })) };
  if (input.action === 'breakers')
    return { action: 'breakers', breakers: await runtime.withDb((db) => breakers(db, { schema })) };
  if (input.action === 'reset_breaker') {
    const by = input.by ?? defaultBy;
    const { previous } = await runtime.withDb((db) => resetBreaker(db, input.destination, { schema, by }));
    if (previous !== null) logger.info('breaker_reset', { destination: input.destination, previous, by });
    return { action: 'reset_breaker', destination: input.destination, previous };
  }
  if (input.action === 'rate_limits') {
    return { action: 'rate_limits', ...(await runtime.withDb((db) => rateLimits(db, { schema }))) };
  }
  if (input.action === 'set_rate_limit' || input.action === 'clear_rate_limit') {
    return rateAction(runtime, input, input.by ?? defaultBy);
  }
  const to = input.queue !== undefined ? { queue: input.queue } : { kind: input.kind as string };
  if ((input.queue === undefined) === (input.kind === undefined)) {
    throw new HttpError(400, 'invalid_request', 'invalid request: name exactly one of queue or kind');
  }
  const scope = input.queue !== undefined ? 'queue' : 'kind';
  const by = input.by ?? defaultBy;
  if (input.action === 'limit' || input.action === 'unlimit') {
    if (input.perKey && input.kind !== undefined) {
      throw new HttpError(400, 'invalid_request', 'invalid request: perKey limits are set on a queue');
    }
    const limitTo: LimitTarget =
      input.queue !== undefined ? { queue: input.queue, perKey: input.perKey } : { kind: input.kind as string };
    const what = { [scope]: input.queue ?? input.kind, perKey: input.perKey ?? false, by };
    if (input.action === 'limit') {
      const result = await runtime.withDb((db) =>
        setLimit(db, limitTo, input.maxRunning, { schema, by, reason: input.reason }),
      );
      logger.info('limit_set', {
        ...what,
        maxRunning: input.maxRunning,
        previous: result.previous,
        reason: input.reason,
      });
      return { action: 'limit', ...result };
    }
    const cleared = await runtime.withDb((db) => clearLimit(db, limitTo, { schema }));
    if (cleared) logger.info('limit_cleared', { ...what, was: cleared.maxRunning });
    return { action: 'unlimit', cleared: cleared !== null, limit: cleared };
  }
  if (input.action === 'pause') {
    const result = await runtime.withDb((db) => pause(db, to, { schema, by, reason: input.reason }));
    if (result.changed) logger.info(`${scope}_paused`, { [scope]: result.pause.name, by, reason: input.reason });
    return { action: 'pause', paused: result.pause, changed: result.changed };
  }
  const ended = await runtime.withDb((db) => resume(db, to, { schema }));
  if (ended) logger.info(`${scope}_resumed`, { [scope]: ended.name, by, pausedSince: ended.pausedAt.toISOString() });
  return { action: 'resume', resumed: ended !== null, pause: ended };
}

type RateInput = Extract<z.output<typeof controlBodySchema>, { action: 'set_rate_limit' | 'clear_rate_limit' }>;

/** set_rate_limit, clear_rate_limit: the target is checked by the core (InvalidOptionsError → 400). */
async function rateAction(runtime: FunctionRuntime, input: RateInput, by: string): Promise<ControlResult> {
  const { schema } = runtime.settings.require('database');
  const { action, queue, kind, destination, perKey } = input;
  const to = { queue, kind, destination, ...(perKey === undefined ? {} : { perKey }) } as RateLimitTarget;
  const what = { queue, kind, destination, perKey: perKey ?? false, by };
  if (action === 'set_rate_limit') {
    const rate = { limit: input.limit, periodMs: input.periodMs ?? 1_000 };
    const result = await runtime.withDb((db) => setRateLimit(db, to, rate, { schema, by, reason: input.reason }));
    runtime.logger.info('rate_limit_set', { ...what, ...rate, previous: result.previous, reason: input.reason });
    return { action, ...result };
  }
  const cleared = await runtime.withDb((db) => clearRateLimit(db, to, { schema }));
  if (cleared) runtime.logger.info('rate_limit_cleared', { ...what, was: cleared });
  return { action, cleared: cleared !== null, rateLimit: cleared };
}
