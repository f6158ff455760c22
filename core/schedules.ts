import { Cron } from 'croner';
import { ConfigError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA, isTimeZone } from '../base/identifiers.js';
import type { JobInsertRow } from '../base/rows.js';
import type { SkiplockConnection } from '../db/connect.js';
import { listRuntimeScheduleRecords } from '../db/statements/runtime-schedules.js';
import { fireSchedule, listScheduleRecords, type ScheduleRecord, syncSchedules } from '../db/statements/schedules.js';
import { ENQUEUE_DEFAULTS, jobInsertRow } from './enqueue.js';
import type { EnqueueOptions } from './enqueue-options.js';
import { check, type PayloadInput, type PayloadSchema } from './issues.js';
import type { JobDefinition } from './jobs.js';
import { type Logger, silentLogger } from './logger.js';

/**
 * What a tick does with occurrences it finds late (their time passed more than `lateAfterMs` ago:
 * the app was down, or no tick ran): `'last'` — enqueue the newest of them once; `'skip'` — enqueue
 * none; a number N — enqueue up to the N newest, oldest first. An occurrence that is not late is
 * always enqueued.
 */
export type MissedPolicy = 'last' | 'skip' | number;

/** Enqueue options a schedule may set for its jobs (the tick sets the dedupe key itself). */
export type ScheduleEnqueueOptions = Omit<EnqueueOptions, 'dedupe' | 'runAt' | 'delayMs' | 'nudge'>;

// biome-ignore lint/suspicious/noExplicitAny: a schedule of any kind.
export interface ScheduleOptions<S extends PayloadSchema = any> {
  /** Unique per app: 1-64 of A-Z a-z 0-9 _ . : - . Renaming a schedule starts it afresh. */
  name: string;
  /** Five fields (minute hour day month weekday), or six with seconds first; `@daily` and the like. */
  cron: string;
  /** An IANA time zone the cron is read in, e.g. 'Europe/Berlin'. @defaultValue 'UTC' */
  timezone?: string;
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every handler type.
  job: JobDefinition<S, any>;
  /** The payload, or a function of the occurrence's time. @defaultValue {} */
  payload?: PayloadInput<S> | ((occurrence: Date) => PayloadInput<S>);
  /** Options for the enqueued jobs (queue, priority, maxAttempts, deadline, keys…). @defaultValue none */
  options?: ScheduleEnqueueOptions;
  /** @defaultValue 'last' */
  missed?: MissedPolicy;
  /** An occurrence older than this when a tick finds it is late. @defaultValue 300000 (5 minutes) */
  lateAfterMs?: number;
}

export interface ScheduleDefinition {
  readonly name: string;
  readonly cron: string;
  readonly timezone: string;
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  readonly job: JobDefinition<any, any>;
  readonly missed: MissedPolicy;
  readonly lateAfterMs: number;
  readonly options: ScheduleEnqueueOptions;
  /** The payload for one occurrence. */
  payloadFor(occurrence: Date): unknown;
  /** The first occurrence strictly after `after`, or null when the pattern has none. */
  next(after: Date): Date | null;
}

export const SCHEDULE_DEFAULTS = { timezone: 'UTC', missed: 'last', lateAfterMs: 300_000 } as const;

/**
 * croner's options for a time zone. UTC as a fixed offset: naming it, or checking the name with
 * Intl, loads the time-zone data (10–50 ms), which a worker whose schedules all run on UTC (the
 * default) would otherwise pay at every cold start.
 */
export function cronZone(timezone: string): { paused: true; timezone?: string; utcOffset?: number } {
  return timezone === 'UTC' ? { paused: true, utcOffset: 0 } : { paused: true, timezone };
}

/** Defines a recurring schedule: the worker's tick enqueues each occurrence of `cron` once. */
// biome-ignore lint/suspicious/noExplicitAny: a schedule of any kind.
export function defineSchedule<S extends PayloadSchema = any>(options: ScheduleOptions<S>): ScheduleDefinition {
  let name: string;
  try {
    name = assertLabel('schedule', options.name);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  const where = `schedule ${name}`;
  const timezone = options.timezone ?? SCHEDULE_DEFAULTS.timezone;
  if (timezone !== 'UTC' && !isTimeZone(timezone)) {
    throw new ConfigError(
      `${where}: unknown time zone ${JSON.stringify(timezone)} (use an IANA name like Europe/Berlin)`,
    );
  }
  let cron: Cron;
  try {
    cron = new Cron(options.cron, cronZone(timezone));
  } catch (err) {
    throw new ConfigError(`${where}: invalid cron ${JSON.stringify(options.cron)}: ${(err as Error).message}`);
  }
  if (!options.job || typeof options.job.kind !== 'string') throw new ConfigError(`${where}: job must be a job kind`);
  const missed = options.missed ?? SCHEDULE_DEFAULTS.missed;
  if (!(missed === 'last' || missed === 'skip' || (Number.isInteger(missed) && missed >= 1 && missed <= 1000))) {
    throw new ConfigError(`${where}: missed must be 'last', 'skip' or a whole number from 1 to 1000`);
  }
  const lateAfterMs = options.lateAfterMs ?? SCHEDULE_DEFAULTS.lateAfterMs;
  if (!(Number.isInteger(lateAfterMs) && lateAfterMs >= 1_000 && lateAfterMs <= 86_400_000)) {
    throw new ConfigError(`${where}: lateAfterMs must be a whole number from 1000 to 86400000`);
  }
  const payload = options.payload ?? {};
  const payloadFor = (occurrence: Date) =>
    typeof payload === 'function' ? (payload as (o: Date) => unknown)(occurrence) : payload;
  // A static payload is checked now, not at 3 a.m.
  if (typeof payload !== 'function') {
    const parsed = check(options.job.payloadSchema, payload);
    if (!parsed.success) throw new ConfigError(`${where}: the payload does not match ${options.job.kind}'s schema`);
  }
  return {
    name,
    cron: options.cron,
    timezone,
    job: options.job,
    missed,
    lateAfterMs,
    options: options.options ?? {},
    payloadFor,
    next: (after) => cron.nextRun(after),
  };
}

/**
 * The occurrences of `def` in (`last`, `now`] and what the tick does with them: `enqueue` (oldest
 * first) by the missed policy, `through`, the newest of them (the schedule's new last
 * occurrence) or null when none is due, and `due`, how many there were. The same instant counts
 * once (a DST change can map two wall-clock times to one instant).
 */
export function dueOccurrences(
  def: Pick<ScheduleDefinition, 'next' | 'missed' | 'lateAfterMs'>,
  last: Date,
  now: Date,
): { enqueue: Date[]; through: Date | null; due: number } {
  const keep = def.missed === 'skip' || def.missed === 'last' ? 1 : def.missed + 1;
  const recent: Date[] = [];
  let due = 0;
  let cursor = last;
  // A long outage of an every-second schedule is a lot of steps: the walk keeps only the newest.
  for (let steps = 0; steps < 1_000_000; steps++) {
    const next = def.next(cursor);
    if (!next || next.getTime() > now.getTime()) break;
    cursor = next.getTime() > cursor.getTime() ? next : new Date(cursor.getTime() + 1_000);
    if (next.getTime() <= (recent.at(-1)?.getTime() ?? last.getTime())) continue;
    due++;
    recent.push(next);
    if (recent.length > keep) recent.shift();
  }
  const through = recent.at(-1) ?? null;
  const late = (d: Date) => now.getTime() - d.getTime() > def.lateAfterMs;
  const onTime = recent.filter((d) => !late(d));
  const lateOnes = recent.filter(late);
  let enqueue: Date[];
  if (def.missed === 'skip') enqueue = onTime.slice(-1);
  else if (def.missed === 'last') enqueue = onTime.length > 0 ? onTime.slice(-1) : lateOnes.slice(-1);
  else enqueue = [...lateOnes.slice(-def.missed), ...onTime];
  return { enqueue, through, due };
}

export interface ScheduleTickOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Test hook: the database's now for this tick. */
  now?: Date;
  logger?: Logger;
  /** @defaultValue 262144 (as createEnqueuer) */
  maxPayloadBytes?: number;
}

export interface ScheduleTickResult {
  /** Occurrences this tick enqueued, per schedule, with their jobs' ids. */
  enqueued: { schedule: string; occurrence: Date; jobId: string | null }[];
  /** Late occurrences the missed policy dropped, per schedule. */
  skipped: { schedule: string; count: number }[];
  /** Schedules that failed (a payload function threw, the payload is invalid): nothing moved. */
  failed: { schedule: string; error: string }[];
}

/**
 * One tick: records the schedules, then for each one with due occurrences enqueues them (by its
 * missed policy) and moves its last occurrence, in one statement per schedule, on the database's
 * clock. Safe to run from any number of invocations at once: each occurrence is enqueued once.
 */
export async function runSchedules(
  conn: SkiplockConnection,
  schedules: readonly ScheduleDefinition[],
  options: ScheduleTickOptions = {},
): Promise<ScheduleTickResult> {
  const result: ScheduleTickResult = { enqueued: [], skipped: [], failed: [] };
  if (schedules.length === 0) return result;
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const logger = options.logger ?? silentLogger;
  const maxPayloadBytes = options.maxPayloadBytes ?? ENQUEUE_DEFAULTS.maxPayloadBytes;
  const { now, last } = await syncSchedules(
    conn.executor,
    schema,
    schedules.map((s) => ({ name: s.name, cron: s.cron, timezone: s.timezone, kind: s.job.kind })),
    options.now,
  );
  for (const def of schedules) {
    const expected = last.get(def.name);
    if (!expected) continue; // another tick is recording it right now
    const { enqueue, through, due } = dueOccurrences(def, expected, now);
    if (!through) continue;
    let rows: JobInsertRow[];
    try {
      rows = enqueue.map((occurrence, ord) =>
        jobInsertRow(
          ord,
          {
            job: def.job,
            payload: def.payloadFor(occurrence),
            options: { ...def.options, dedupe: { key: `${def.name}@${occurrence.toISOString()}` } },
          },
          maxPayloadBytes,
        ),
      );
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      result.failed.push({ schedule: def.name, error });
      logger.error('schedule_failed', { schedule: def.name, error });
      continue;
    }
    const fired = await fireSchedule(conn.executor, schema, { name: def.name, expected, last: through, rows });
    if (!fired.fired) continue; // another tick moved it first
    enqueue.forEach((occurrence, i) => {
      const jobId = fired.ids[i] ?? null;
      result.enqueued.push({ schedule: def.name, occurrence, jobId });
      logger.info('schedule_enqueued', { schedule: def.name, occurrence: occurrence.toISOString(), jobId });
    });
    const dropped = due - enqueue.length;
    if (dropped > 0) {
      result.skipped.push({ schedule: def.name, count: dropped });
      logger.warn('schedule_missed', { schedule: def.name, skipped: dropped, policy: def.missed });
    }
  }
  return result;
}

/**
 * A schedule as `skiplock schedules` shows it: a code schedule (the database's record, and the
 * code's definition when given) or a run-time one (createSchedule).
 */
export interface ScheduleStatus {
  /** The code schedule's name, or the run-time schedule's key. */
  name: string;
  /** Its cron; null for a run-time schedule with a fixed interval. */
  cron: string | null;
  /** A run-time schedule's fixed interval; null otherwise. */
  intervalMs: number | null;
  timezone: string;
  kind: string;
  /** The newest occurrence handled; null for a schedule the code defines and no tick has recorded. */
  lastOccurrence: Date | null;
  lastJobId: string | null;
  lastEnqueuedAt: Date | null;
  /** The next occurrence after now (a run-time schedule: its next run; null when paused or ended). */
  nextOccurrence: Date | null;
  /** When a run-time schedule was paused; null when it runs (and for code schedules). */
  pausedAt: Date | null;
  /**
   * `code`: defined in the code given, not recorded yet; `database`: recorded by a tick, not in the
   * code given; `both`; `runtime`: created at run time (data, not code).
   */
  source: 'code' | 'database' | 'both' | 'runtime';
}

/**
 * Every schedule in one list, by name: the code schedules the database remembers, with the
 * code's (`defined`) merged in, each with its next occurrence, and the run-time schedules (the
 * first `runtimeLimit` by key, or those whose key starts with `prefix`).
 */
export async function listSchedules(
  conn: SkiplockConnection,
  options: {
    schema?: string;
    defined?: readonly ScheduleDefinition[];
    now?: Date;
    /** Only run-time schedules whose key starts with this. @defaultValue all */
    prefix?: string;
    /** Run-time schedules listed at most. @defaultValue 1000 */
    runtimeLimit?: number;
  } = {},
): Promise<ScheduleStatus[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const records = await listScheduleRecords(conn.executor, schema);
  const runtime = await listRuntimeScheduleRecords(conn.executor, schema, {
    prefix: options.prefix,
    limit: Math.min(Math.max(options.runtimeLimit ?? 1000, 1), 100_000),
  });
  const now = options.now ?? new Date();
  const defined = new Map((options.defined ?? []).map((d) => [d.name, d]));
  const nextOf = (cron: string, timezone: string) => {
    try {
      return new Cron(cron, cronZone(timezone)).nextRun(now);
    } catch {
      return null;
    }
  };
  const rows: ScheduleStatus[] = records.map((r: ScheduleRecord) => ({
    name: r.name,
    cron: r.cron,
    intervalMs: null,
    timezone: r.timezone,
    kind: r.kind,
    lastOccurrence: r.lastOccurrence,
    lastJobId: r.lastJobId,
    lastEnqueuedAt: r.lastEnqueuedAt,
    nextOccurrence: nextOf(r.cron, r.timezone),
    pausedAt: null,
    source: defined.has(r.name) ? 'both' : 'database',
  }));
  for (const d of defined.values()) {
    if (records.some((r) => r.name === d.name)) continue;
    rows.push({
      name: d.name,
      cron: d.cron,
      intervalMs: null,
      timezone: d.timezone,
      kind: d.job.kind,
      lastOccurrence: null,
      lastJobId: null,
      lastEnqueuedAt: null,
      nextOccurrence: d.next(now),
      pausedAt: null,
      source: 'code',
    });
  }
  for (const r of runtime) {
    rows.push({
      name: r.key,
      cron: r.cron,
      intervalMs: r.intervalMs,
      timezone: r.timezone,
      kind: r.kind,
      lastOccurrence: r.lastOccurrence,
      lastJobId: null,
      lastEnqueuedAt: r.lastEnqueuedAt,
      nextOccurrence: r.nextRunAt,
      pausedAt: r.pausedAt,
      source: 'runtime',
    });
  }
  return rows.sort((a, b) => a.name.localeCompare(b.name) || a.source.localeCompare(b.source));
}
