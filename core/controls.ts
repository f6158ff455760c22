import type { LimitScope } from '../base/controls.js';
import { InvalidOptionsError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from '../db/connect.js';
import type { LimitOverride } from '../db/statements/limits.js';
import {
  clearLimit as clearLimitStatement,
  listLimits,
  setLimit as setLimitStatement,
} from '../db/statements/limits-admin.js';
import {
  listPauses,
  type Pause,
  type PauseScope,
  pause as pauseStatement,
  resume as resumeStatement,
} from '../db/statements/pauses.js';

/**
 * The controls an operator changes at run time (pauses and concurrency limits; breakers.ts and
 * rate-limits.ts hold the others) — the CLI, the control route and the API call these.
 * Every rule is kept in the database and applied by each claim, so it holds for every invocation
 * from its next claim on, whichever process set it.
 */
export interface ControlOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
}

/** @deprecated Renamed `ControlOptions` ("flow" now names only job graphs: `enqueueFlow`). */
export type FlowControlOptions = ControlOptions;

/** A queue or a kind: `{ queue: 'webhooks' }` or `{ kind: 'send-email' }`. */
export type PauseTarget = { queue: string; kind?: never } | { kind: string; queue?: never };

function targetOf(target: PauseTarget): { scope: PauseScope; name: string } {
  const queue = (target as { queue?: unknown }).queue;
  const kind = (target as { kind?: unknown }).kind;
  if ((queue === undefined) === (kind === undefined)) {
    throw new InvalidOptionsError('name exactly one of queue or kind');
  }
  try {
    return queue !== undefined
      ? { scope: 'queue', name: assertLabel('queue', queue as string) }
      : { scope: 'kind', name: assertLabel('kind', kind as string) };
  } catch (err) {
    throw new InvalidOptionsError((err as Error).message);
  }
}

const schemaOf = (options: ControlOptions) => assertSchemaName(options.schema ?? DEFAULT_SCHEMA);

/**
 * Pauses a queue or a kind: from the next claim on, no invocation takes its jobs (nor rescues its
 * expired leases); they keep their attempts; jobs already running finish. Pausing what is paused
 * changes nothing (`changed: false`; it stays paused since the first time). A job past its
 * deadline still goes to the DLQ.
 */
export async function pause(
  conn: SkiplockConnection,
  target: PauseTarget,
  options: ControlOptions & { by: string; reason?: string },
): Promise<{ pause: Pause; changed: boolean }> {
  const by = typeof options.by === 'string' ? options.by.trim() : '';
  if (by.length === 0 || by.length > 255) throw new InvalidOptionsError('by must name who pauses (1-255 characters)');
  if (options.reason !== undefined && (typeof options.reason !== 'string' || options.reason.length > 1000)) {
    throw new InvalidOptionsError('reason must be a string of at most 1000 characters');
  }
  return pauseStatement(conn.executor, schemaOf(options), { ...targetOf(target), by, reason: options.reason });
}

/** Resumes a paused queue or kind: its jobs are claimable at the next claim. Returns the pause it ended, or null. */
export async function resume(
  conn: SkiplockConnection,
  target: PauseTarget,
  options: ControlOptions = {},
): Promise<Pause | null> {
  return resumeStatement(conn.executor, schemaOf(options), targetOf(target));
}

/** What is paused, since when and by whom, oldest first. */
export async function pauses(conn: SkiplockConnection, options: ControlOptions = {}): Promise<Pause[]> {
  return listPauses(conn.executor, schemaOf(options));
}

/**
 * What a limit counts: `{ queue }` — running jobs in the queue; `{ kind }` — running jobs of the
 * kind; `{ queue, perKey: true }` — running jobs of each concurrency key in the queue.
 */
export type LimitTarget =
  | { queue: string; kind?: never; perKey?: boolean }
  | { kind: string; queue?: never; perKey?: never };

function limitTargetOf(target: LimitTarget): { scope: LimitScope; name: string } {
  const perKey = (target as { perKey?: unknown }).perKey;
  if (perKey !== undefined && typeof perKey !== 'boolean') throw new InvalidOptionsError('perKey must be a boolean');
  const { scope, name } = targetOf({ queue: target.queue, kind: target.kind } as PauseTarget);
  if (perKey && scope === 'kind') throw new InvalidOptionsError('perKey limits are set on a queue');
  return { scope: perKey ? 'key' : scope, name };
}

/**
 * Sets a concurrency limit at run time: from the next claim on, no invocation starts a job that
 * would make more than `maxRunning` run in the target; running jobs are not stopped. It overrides
 * the limit the code declares for the same target until clearLimit(). Returns the limit and the
 * override it replaced (null when there was none).
 */
export async function setLimit(
  conn: SkiplockConnection,
  target: LimitTarget,
  maxRunning: number,
  options: ControlOptions & { by: string; reason?: string },
): Promise<{ limit: LimitOverride; previous: number | null }> {
  const by = typeof options.by === 'string' ? options.by.trim() : '';
  if (by.length === 0 || by.length > 255)
    throw new InvalidOptionsError('by must name who sets the limit (1-255 characters)');
  if (!Number.isInteger(maxRunning) || maxRunning < 1 || maxRunning > 100_000) {
    throw new InvalidOptionsError('a limit must be an integer from 1 to 100000 (pause a queue to run none)');
  }
  if (options.reason !== undefined && (typeof options.reason !== 'string' || options.reason.length > 1000)) {
    throw new InvalidOptionsError('reason must be a string of at most 1000 characters');
  }
  return setLimitStatement(conn.executor, schemaOf(options), {
    ...limitTargetOf(target),
    maxRunning,
    by,
    reason: options.reason,
  });
}

/** Removes a run-time limit: the code's limit for the target, if any, applies again from the next claim. */
export async function clearLimit(
  conn: SkiplockConnection,
  target: LimitTarget,
  options: ControlOptions = {},
): Promise<LimitOverride | null> {
  return clearLimitStatement(conn.executor, schemaOf(options), limitTargetOf(target));
}

/**
 * The run-time limits, each with how many jobs run in its target now (for a per-key limit: the
 * busiest key and its count). Limits declared only in code are not stored: the worker applies them.
 */
export async function limits(
  conn: SkiplockConnection,
  options: ControlOptions = {},
): Promise<(LimitOverride & { running: number; busiestKey: string | null })[]> {
  return listLimits(conn.executor, schemaOf(options));
}

export type { LimitOverride, LimitScope, Pause, PauseScope };
