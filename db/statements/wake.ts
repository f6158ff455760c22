import { sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, jobsRef, runningRow, toDate } from './common.js';

/** When a worker of these kinds (and queues) next has something to do, as the database sees it. */
export interface NextDue {
  /** The earliest run_at of a queued job it may claim: due now when it is in the past. */
  jobAt: Date | null;
  /** The earliest lease of a running job: if its invocation died, the claim rescues it then. */
  leaseAt: Date | null;
  /**
   * The earliest next run of a run-time schedule (any kind: every worker ticks them), or the end of
   * the claim a tick holds on it.
   */
  scheduleAt: Date | null;
}

/**
 * NextDue: an idle invocation asks it once before it ends, so the platform can wake a worker when
 * something is due instead of on every tick. Parked and waiting rows (run_at infinity) wait for a
 * release or a signal, which nudges. The scan covers the queued rows of the worker's kinds, which
 * on an idle queue are only the ones waiting for a later run_at.
 */
export async function nextDue(
  db: Executor,
  schema: string,
  request: { kinds: readonly string[]; queues?: readonly string[] },
): Promise<NextDue> {
  const jobs = jobsRef(schema);
  const mine = sql`j.kind = any(${sql.param(request.kinds)}::text[]) ${
    request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``
  }`;
  const rows = await queryRows<{ job_at: number | null; lease_at: number | null; schedule_at: number | null }>(
    db,
    sql`select
      (select ${epochMs(sql`min(j.run_at)`)} from ${jobs} j
        where j.state = 'queued' and j.run_at <> 'infinity' and ${mine}) as job_at,
      (select ${epochMs(sql`min(j.lease_expires_at)`)} from ${jobs} j
        where ${runningRow('j')} and ${mine}) as lease_at,
      -- The first rows of runtime_schedules_due_idx; one a tick holds is due again when its claim ends.
      (select ${epochMs(sql`min(greatest(s.next_run_at, s.claimed_until))`)} from (
        select s.next_run_at, s.claimed_until from ${sql.identifier(schema)}.runtime_schedules s
        where s.next_run_at is not null order by s.next_run_at limit 16) s) as schedule_at`,
    schema,
  );
  const row = rows[0];
  return { jobAt: toDate(row?.job_at), leaseAt: toDate(row?.lease_at), scheduleAt: toDate(row?.schedule_at) };
}
