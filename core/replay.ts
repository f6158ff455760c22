import * as z from 'zod/mini';
import { InvalidOptionsError, PayloadValidationError, type SkiplockError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { ReplayResult } from '../base/outcomes.js';
import type { SkiplockConnection } from '../db/connect.js';
import { replayDead } from '../db/statements/replay.js';
import { check, describeIssues, issuesOf } from './issues.js';
import type { JobRegistry } from './jobs.js';

export interface ReplayOptions {
  /** Replay these dead jobs. Ids that are not dead are refused, each with a message. */
  ids?: readonly string[];
  kind?: string;
  queue?: string;
  /** Only jobs that died for this reason (max_attempts, lease_expired, deadline_exceeded, http_4xx, …). */
  reason?: string;
  since?: Date;
  until?: Date;
  /** Required to replay with no ids and no filter at all: replays every dead job (up to `limit`). */
  all?: boolean;
  /** @defaultValue 100 (at most 10000) */
  limit?: number;
  /** Report what would be replayed; change nothing. @defaultValue false */
  dryRun?: boolean;
  /** Start the attempt count from zero. @defaultValue true */
  resetAttempts?: boolean;
  /**
   * Forget the durable steps from this one on (it and every later step run again); the earlier
   * steps keep their results. Jobs that never reached it keep all of theirs. @defaultValue none
   */
  fromStep?: string;
  /** Forget every durable step: the job starts from the beginning. @defaultValue false (resume at the failed step) */
  restart?: boolean;
  /** Replace fields of the replayed jobs. A payload override needs `kind` and is validated. */
  override?: { payload?: unknown; queue?: string; priority?: number; maxAttempts?: number };
  /** Who asked (a user, a function name), kept as replayed_by. @defaultValue 'unknown' */
  by?: string;
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Needed to validate a payload override against its kind's schema. */
  registry?: JobRegistry;
}

export const REPLAY_DEFAULTS = { limit: 100, dryRun: false, resetAttempts: true, by: 'unknown' } as const;

const optionsSchema = z.object({
  ids: z.optional(
    z
      .array(z.string().check(z.regex(/^[1-9][0-9]{0,18}$/, 'job ids are positive integers')))
      .check(z.maxLength(10_000)),
  ),
  limit: z.optional(z.int().check(z.gte(1), z.lte(10_000))),
  priority: z.optional(z.int().check(z.gte(-1000), z.lte(1000))),
  maxAttempts: z.optional(z.int().check(z.gte(1), z.lte(1000))),
  by: z.optional(z.string().check(z.minLength(1), z.maxLength(255))),
  reason: z.optional(z.string().check(z.minLength(1), z.maxLength(100))),
});

/**
 * Replays dead jobs by ids or by filter. Idempotent: a replayed job is no longer dead, so
 * the same call made twice replays nothing the second time and never makes a second live job.
 */
export async function replay(conn: SkiplockConnection, options: ReplayOptions): Promise<ReplayResult> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  if (options.restart && options.fromStep !== undefined) {
    throw new InvalidOptionsError('invalid replay: give restart or fromStep, not both');
  }
  if (
    options.fromStep !== undefined &&
    (typeof options.fromStep !== 'string' || options.fromStep.length === 0 || options.fromStep.length > 200)
  ) {
    throw new InvalidOptionsError('invalid replay: fromStep must be a step name of 1 to 200 characters');
  }
  const checked = check(optionsSchema, {
    ids: options.ids,
    limit: options.limit,
    priority: options.override?.priority,
    maxAttempts: options.override?.maxAttempts,
    by: options.by,
    reason: options.reason,
  });
  if (!checked.success) {
    throw new InvalidOptionsError(`invalid replay: ${describeIssues(checked.error, 'options')}`);
  }
  const hasFilter =
    (options.ids?.length ?? 0) > 0 ||
    [options.kind, options.queue, options.reason, options.since, options.until].some((v) => v !== undefined);
  if (!hasFilter && !options.all) {
    throw new InvalidOptionsError(
      'refusing to replay with no ids and no filter; pass all: true to replay every dead job',
    );
  }
  try {
    if (options.kind !== undefined) assertLabel('kind', options.kind);
    if (options.queue !== undefined) assertLabel('queue', options.queue);
    if (options.override?.queue !== undefined) assertLabel('queue', options.override.queue);
  } catch (err) {
    throw new InvalidOptionsError((err as SkiplockError).message);
  }
  let payload = options.override?.payload;
  if (payload !== undefined) {
    if (!options.kind || !options.registry) {
      throw new InvalidOptionsError('a payload override needs `kind` (and a registry to validate it against)');
    }
    const definition = options.registry.get(options.kind);
    const parsed = check(definition.payloadSchema, payload);
    if (!parsed.success) {
      throw new PayloadValidationError(definition.kind, issuesOf(parsed.error));
    }
    payload = parsed.data;
  }
  return replayDead(conn.executor, schema, {
    filter: {
      ids: options.ids,
      kind: options.kind,
      queue: options.queue,
      reason: options.reason,
      since: options.since,
      until: options.until,
    },
    limit: options.limit ?? REPLAY_DEFAULTS.limit,
    dryRun: options.dryRun ?? REPLAY_DEFAULTS.dryRun,
    resetAttempts: options.resetAttempts ?? REPLAY_DEFAULTS.resetAttempts,
    override: { ...options.override, payload },
    by: options.by ?? REPLAY_DEFAULTS.by,
    steps: {
      restart: options.restart === true,
      ...(options.fromStep === undefined ? {} : { fromStep: options.fromStep }),
    },
  });
}
