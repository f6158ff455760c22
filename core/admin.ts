import type { SkiplockDb } from '../db/connect.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../db/identifiers.js';
import {
  type CancelOutcome,
  cancelJobs,
  expireDeadlines as expireDeadlinesStatement,
  getJobs,
  type JobRecord,
  type QueueActivityRow,
  type QueueStatsRow,
  queueActivity,
  queueStats,
} from '../db/statements/admin.js';
import { InvalidOptionsError } from './errors.js';

interface SchemaOption {
  /** @defaultValue 'skiplock' */
  schema?: string;
}

const JOB_ID = /^[1-9][0-9]{0,18}$/;

function checkIds(ids: readonly string[]): readonly string[] {
  const bad = ids.filter((id) => !JOB_ID.test(String(id)));
  if (bad.length > 0)
    throw new InvalidOptionsError(
      `invalid job id(s): ${bad
        .slice(0, 5)
        .map((b) => JSON.stringify(b))
        .join(', ')}`,
    );
  return ids;
}

/** Cancels queued or running jobs; finished ones are reported with their state, unchanged. */
export async function cancel(
  conn: SkiplockDb,
  ids: readonly string[],
  options: SchemaOption = {},
): Promise<CancelOutcome[]> {
  return cancelJobs(conn.db, assertSchemaName(options.schema ?? DEFAULT_SCHEMA), checkIds(ids));
}

/** One job with its whole history, or null. */
export async function getJob(conn: SkiplockDb, id: string, options: SchemaOption = {}): Promise<JobRecord | null> {
  const [job] = await getJobs(conn.db, assertSchemaName(options.schema ?? DEFAULT_SCHEMA), checkIds([id]));
  return job ?? null;
}

/** Depth per queue and kind (ready, scheduled, retry-waiting, running, expired leases, dead, …). */
export async function stats(conn: SkiplockDb, options: SchemaOption = {}): Promise<QueueStatsRow[]> {
  return queueStats(conn.db, assertSchemaName(options.schema ?? DEFAULT_SCHEMA));
}

/** Throughput and error rate per queue and kind over the last `windowSeconds` (default 300). */
export async function activity(
  conn: SkiplockDb,
  options: SchemaOption & { windowSeconds?: number } = {},
): Promise<QueueActivityRow[]> {
  return queueActivity(conn.db, assertSchemaName(options.schema ?? DEFAULT_SCHEMA), options.windowSeconds ?? 300);
}

/** Moves queued jobs past their deadline to the DLQ (`deadline_exceeded`). Returns their ids. */
export async function expireDeadlines(
  conn: SkiplockDb,
  options: SchemaOption & { limit?: number } = {},
): Promise<string[]> {
  return expireDeadlinesStatement(conn.db, assertSchemaName(options.schema ?? DEFAULT_SCHEMA), options.limit ?? 1000);
}

export type { CancelOutcome, JobRecord, QueueActivityRow, QueueStatsRow };
