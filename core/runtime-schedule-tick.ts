import { Cron } from 'croner';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { JobInsertRow } from '../base/rows.js';
import { executorOf } from '../db/executor-of.js';
import {
  claimDueRuntimeSchedules,
  fireRuntimeSchedules,
  type RuntimeScheduleMove,
  type RuntimeScheduleRecord,
} from '../db/statements/runtime-schedules.js';
import type { EnqueueTarget } from './enqueue.js';
import { type Logger, silentLogger } from './logger.js';
import { cronZone, dueOccurrences, type MissedPolicy } from './schedules.js';

// The tick of run-time schedules, apart from the functions that write them (runtime-schedules.ts):
// a worker imports only this.

/** When a pattern (cron or interval, start, end) next runs after `after`: the tick and the writes share it. */
export interface SchedulePattern {
  next(after: Date): Date | null;
}

/** The pattern of a stored schedule (or a spec about to be stored). */
export function patternOf(s: {
  cron: string | null;
  intervalMs: number | null;
  timezone: string;
  startAt: Date | null;
  endAt: Date | null;
  anchor: Date;
}): SchedulePattern {
  let raw: (after: Date) => Date | null;
  if (s.intervalMs !== null) {
    const every = s.intervalMs;
    const anchor = s.startAt?.getTime() ?? s.anchor.getTime();
    raw = (after) => {
      const t = after.getTime();
      if (t < anchor) return new Date(anchor);
      return new Date(anchor + (Math.floor((t - anchor) / every) + 1) * every);
    };
  } else {
    const cron = new Cron(s.cron as string, cronZone(s.timezone));
    raw = (after) => cron.nextRun(after);
  }
  const start = s.startAt ? s.startAt.getTime() - 1 : null;
  const end = s.endAt?.getTime() ?? null;
  return {
    next: (after) => {
      const from = start !== null && after.getTime() < start ? new Date(start) : after;
      const next = raw(from);
      return next && end !== null && next.getTime() > end ? null : next;
    },
  };
}

export function parseMissed(text: string): MissedPolicy {
  return text === 'last' || text === 'skip' ? text : Number(text);
}

export const RUNTIME_TICK_DEFAULTS = { limit: 1000, leaseMs: 30_000, maxRounds: 10 } as const;

export interface RuntimeTickOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Test hook: the database's now for this tick. */
  now?: Date;
  logger?: Logger;
  /** Schedules claimed per statement. @defaultValue 1000 */
  limit?: number;
  /** How long a claim keeps other ticks off a schedule, should this tick die. @defaultValue 30000 */
  leaseMs?: number;
  /** Claims per tick at most (another follows only when more were due). @defaultValue 10 */
  maxRounds?: number;
}

export interface RuntimeTickResult {
  /** Occurrences enqueued, with their jobs' ids (null: a live job already held its dedupe key). */
  enqueued: { schedule: string; occurrence: Date; jobId: string | null }[];
  /** Late occurrences the missed policy dropped, per schedule. */
  skipped: { schedule: string; count: number }[];
  /** Schedules claimed, and statements sent. */
  claimed: number;
  statements: number;
}

/**
 * One tick of the run-time schedules: claim the due ones (ONE statement, through the index, SKIP
 * LOCKED), compute their occurrences in JavaScript by the same rules as code schedules
 * (dueOccurrences: the missed policy, DST), then move them and enqueue their jobs (ONE
 * statement, a compare-and-set per schedule). Two statements per round of up to `limit`
 * schedules; safe beside any number of concurrent ticks, on every driver, with no transaction.
 */
export async function runRuntimeSchedules(
  conn: EnqueueTarget,
  options: RuntimeTickOptions = {},
): Promise<RuntimeTickResult> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const db = executorOf(conn);
  const logger = options.logger ?? silentLogger;
  const limit = options.limit ?? RUNTIME_TICK_DEFAULTS.limit;
  const leaseMs = options.leaseMs ?? RUNTIME_TICK_DEFAULTS.leaseMs;
  const maxRounds = options.maxRounds ?? RUNTIME_TICK_DEFAULTS.maxRounds;
  const result: RuntimeTickResult = { enqueued: [], skipped: [], claimed: 0, statements: 0 };
  for (let round = 0; round < maxRounds; round++) {
    const claim = await claimDueRuntimeSchedules(db, schema, { limit, leaseMs, now: options.now });
    result.statements++;
    result.claimed += claim.rows.length;
    if (claim.rows.length === 0) break;
    const plan = planRuntimeTick(claim.rows, claim.now, logger);
    const fired = await fireRuntimeSchedules(db, schema, plan);
    result.statements++;
    plan.rows.forEach((row, ord) => {
      const schedule = plan.scheduleOf[ord] as string;
      if (!fired.moved.has(schedule)) return;
      const occurrence = new Date((row.dedupe_key as string).slice(schedule.length + 1));
      const jobId = fired.ids[ord] ?? null;
      result.enqueued.push({ schedule, occurrence, jobId });
      logger.info('schedule_enqueued', { schedule, occurrence: occurrence.toISOString(), jobId, source: 'runtime' });
    });
    for (const s of plan.skipped) {
      result.skipped.push(s);
      logger.warn('schedule_missed', { schedule: s.schedule, skipped: s.count, source: 'runtime' });
    }
    if (!claim.more) break;
  }
  return result;
}

/** The claimed schedules' occurrences as job rows, and where each schedule moves to (exported for tests). */
export function planRuntimeTick(
  claimed: readonly RuntimeScheduleRecord[],
  now: Date,
  logger: Logger,
): {
  moves: RuntimeScheduleMove[];
  rows: JobInsertRow[];
  scheduleOf: string[];
  skipped: { schedule: string; count: number }[];
} {
  const moves: RuntimeScheduleMove[] = [];
  const rows: JobInsertRow[] = [];
  const scheduleOf: string[] = [];
  const skipped: { schedule: string; count: number }[] = [];
  for (const s of claimed) {
    const expectedNext = s.nextRunAt as Date;
    let pattern: SchedulePattern;
    try {
      pattern = patternOf({ ...s, anchor: s.createdAt });
    } catch (err) {
      // A row an operator wrote by hand with a cron croner refuses: parked until it is fixed.
      logger.error('schedule_failed', { schedule: s.key, error: (err as Error).message, source: 'runtime' });
      moves.push({ key: s.key, version: s.version, expectedNext, next: null, last: null, enqueued: false });
      continue;
    }
    const def = { next: pattern.next, missed: parseMissed(s.missed), lateAfterMs: s.lateAfterMs };
    // next_run_at is the first occurrence not yet handled: walk from just before it.
    const { enqueue, through, due } = dueOccurrences(def, new Date(expectedNext.getTime() - 1), now);
    const next = pattern.next(through ?? new Date(Math.max(now.getTime(), expectedNext.getTime() - 1)));
    moves.push({ key: s.key, version: s.version, expectedNext, next, last: through, enqueued: enqueue.length > 0 });
    if (due > enqueue.length) skipped.push({ schedule: s.key, count: due - enqueue.length });
    const o = s.jobOptions;
    const payloadJson = JSON.stringify(s.payload);
    for (const occurrence of enqueue) {
      scheduleOf.push(s.key);
      rows.push({
        ord: rows.length,
        kind: s.kind,
        queue: s.queue,
        payload_json: payloadJson,
        priority: o.priority,
        run_at: null,
        delay_ms: null,
        max_attempts: o.max_attempts,
        deadline: o.deadline_ms ? new Date(now.getTime() + o.deadline_ms).toISOString() : null,
        dedupe_key: `${s.key}@${occurrence.toISOString()}`,
        dedupe_mode: 'skip',
        window_ms: null,
        correlation_id: o.correlation_id,
        ordering_key: o.ordering_key,
        ordering_hold: o.ordering_hold,
        concurrency_key: o.concurrency_key,
        destination: o.destination,
      });
    }
  }
  return { moves, rows, scheduleOf, skipped };
}
