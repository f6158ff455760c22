import { type SQL, sql } from 'drizzle-orm';
import type { JobRecord, ParentJob } from '../../base/rows.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import type { JobState } from '../schema.js';
import { epochMs, jobsRef, toDate } from './common.js';

const TIMESTAMPS = [
  'run_at',
  'lease_expires_at',
  'deadline',
  'created_at',
  'updated_at',
  'started_at',
  'attempted_at',
  'finished_at',
  'replayed_at',
] as const;

// Built per call, never at module load: a bundled function initialises drizzle lazily, after this module.
const columns = () => sql`j.id::text as id, j.kind, j.queue, j.payload, j.priority, j.state, j.attempt, j.max_attempts,
  j.dedupe_key, j.dedupe_mode, j.lease_token::text as lease_token, j.locked_by, j.last_error, j.errors,
  j.dead_reason, j.progress, j.result, j.correlation_id, j.replay_count, j.replayed_by,
  j.after::text[] as after, j.dependents::text[] as dependents, j.on_parent_failure,
  ${sql.join(
    TIMESTAMPS.map((c) => sql`${epochMs(sql`${sql.identifier(c)}`)} as ${sql.identifier(`${c}_ms`)}`),
    sql`, `,
  )}`;

/** Reads jobs by id (JobGetMany); unknown ids are absent. */
export async function getJobs(db: Executor, schema: string, ids: readonly string[]): Promise<JobRecord[]> {
  if (ids.length === 0) return [];
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select ${columns()} from ${jobsRef(schema)} j where j.id = any(${sql.param(ids)}::bigint[]) order by j.id`,
    schema,
  );
  return rows.map(toJobRecord);
}

export interface JobFilter {
  state?: JobState;
  queue?: string;
  kind?: string;
  /** dead_reason (DLQ listings). */
  reason?: string;
  /** Created (or, for finished jobs, finished) at or after this time. */
  since?: Date;
  /** Only jobs with a smaller id: the next page after a page that ended with this id. */
  beforeId?: string;
  /** Newest first. @defaultValue 50 */
  limit?: number;
}

/** Lists jobs, newest first (JobListMany): by state, queue, kind, DLQ reason, time. */
export async function listJobs(db: Executor, schema: string, filter: JobFilter): Promise<JobRecord[]> {
  const conditions: SQL[] = [sql`true`];
  if (filter.state) conditions.push(sql`j.state = ${filter.state}`);
  if (filter.queue !== undefined) conditions.push(sql`j.queue = ${filter.queue}`);
  if (filter.kind !== undefined) conditions.push(sql`j.kind = ${filter.kind}`);
  if (filter.reason !== undefined) conditions.push(sql`j.dead_reason = ${filter.reason}`);
  if (filter.since)
    conditions.push(sql`coalesce(j.finished_at, j.created_at) >= ${filter.since.toISOString()}::timestamptz`);
  if (filter.beforeId !== undefined) conditions.push(sql`j.id < ${filter.beforeId}::bigint`);
  const rows = await queryRows<Record<string, unknown>>(
    db,
    sql`select ${columns()} from ${jobsRef(schema)} j where ${sql.join(conditions, sql` and `)}
      order by j.id desc limit ${filter.limit ?? 50}`,
    schema,
  );
  return rows.map(toJobRecord);
}

function toJobRecord(r: Record<string, unknown>): JobRecord {
  return {
    id: r.id as string,
    kind: r.kind as string,
    queue: r.queue as string,
    payload: r.payload,
    priority: r.priority as number,
    state: r.state as JobState,
    runAt: toDate(r.run_at_ms as number) as Date,
    attempt: r.attempt as number,
    maxAttempts: r.max_attempts as number,
    dedupeKey: r.dedupe_key as string | null,
    dedupeMode: r.dedupe_mode as string | null,
    leaseToken: r.lease_token as string | null,
    leaseExpiresAt: toDate(r.lease_expires_at_ms as number | null),
    lockedBy: r.locked_by as string | null,
    deadline: toDate(r.deadline_ms as number | null),
    lastError: r.last_error as Record<string, unknown> | null,
    errors: r.errors as Record<string, unknown>[],
    deadReason: r.dead_reason as string | null,
    progress: r.progress,
    result: r.result ?? null,
    correlationId: r.correlation_id as string | null,
    createdAt: toDate(r.created_at_ms as number) as Date,
    updatedAt: toDate(r.updated_at_ms as number) as Date,
    startedAt: toDate(r.started_at_ms as number | null),
    attemptedAt: toDate(r.attempted_at_ms as number | null),
    finishedAt: toDate(r.finished_at_ms as number | null),
    replayCount: r.replay_count as number,
    replayedAt: toDate(r.replayed_at_ms as number | null),
    replayedBy: r.replayed_by as string | null,
    after: (r.after as string[] | null) ?? [],
    dependents: (r.dependents as string[] | null) ?? [],
    onParentFailure: r.on_parent_failure as JobRecord['onParentFailure'],
  };
}

/**
 * The parents of job `id` (JobParents), in the order it lists them, with their state and result;
 * a parent whose row is gone (deleted when it completed, or pruned) comes back with state null.
 */
export async function readParents(db: Executor, schema: string, id: string): Promise<ParentJob[]> {
  const jobs = jobsRef(schema);
  const rows = await queryRows<{ id: string; kind: string | null; state: JobState | null; result: unknown }>(
    db,
    sql`select a.pid::text as id, p.kind, p.state, p.result
      from ${jobs} c cross join lateral unnest(c.after) with ordinality as a(pid, n)
      left join ${jobs} p on p.id = a.pid
      where c.id = ${id}::bigint
      order by a.n`,
    schema,
  );
  return rows.map((r) => ({ id: r.id, kind: r.kind, state: r.state, result: r.result ?? null }));
}
