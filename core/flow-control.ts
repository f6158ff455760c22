import { InvalidOptionsError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockDb } from '../db/connect.js';
import {
  listPauses,
  type Pause,
  type PauseScope,
  pause as pauseStatement,
  resume as resumeStatement,
} from '../db/statements/pauses.js';

/**
 * Flow control an operator changes at run time — the CLI, the control route and the API call these.
 * Every rule is kept in the database and applied by each claim, so it holds for every invocation
 * from its next claim on, whichever process set it.
 */
export interface FlowControlOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
}

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

const schemaOf = (options: FlowControlOptions) => assertSchemaName(options.schema ?? DEFAULT_SCHEMA);

/**
 * Pauses a queue or a kind: from the next claim on, no invocation takes its jobs (nor rescues its
 * expired leases); they keep their attempts; jobs already running finish. Pausing what is paused
 * changes nothing (`changed: false`; it stays paused since the first time). A job past its
 * deadline still goes to the DLQ.
 */
export async function pause(
  conn: SkiplockDb,
  target: PauseTarget,
  options: FlowControlOptions & { by: string; reason?: string },
): Promise<{ pause: Pause; changed: boolean }> {
  const by = typeof options.by === 'string' ? options.by.trim() : '';
  if (by.length === 0 || by.length > 255) throw new InvalidOptionsError('by must name who pauses (1-255 characters)');
  if (options.reason !== undefined && (typeof options.reason !== 'string' || options.reason.length > 1000)) {
    throw new InvalidOptionsError('reason must be a string of at most 1000 characters');
  }
  return pauseStatement(conn.db, schemaOf(options), { ...targetOf(target), by, reason: options.reason });
}

/** Resumes a paused queue or kind: its jobs are claimable at the next claim. Returns the pause it ended, or null. */
export async function resume(
  conn: SkiplockDb,
  target: PauseTarget,
  options: FlowControlOptions = {},
): Promise<Pause | null> {
  return resumeStatement(conn.db, schemaOf(options), targetOf(target));
}

/** What is paused, since when and by whom, oldest first. */
export async function pauses(conn: SkiplockDb, options: FlowControlOptions = {}): Promise<Pause[]> {
  return listPauses(conn.db, schemaOf(options));
}

export type { Pause, PauseScope };
