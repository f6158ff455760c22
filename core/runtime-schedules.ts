import { Cron } from 'croner';
import type { SQL } from 'drizzle-orm';
import { InvalidOptionsError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA, isTimeZone } from '../base/identifiers.js';
import { queryRows } from '../db/execute.js';
import { executorOf } from '../db/executor-of.js';
import {
  deleteRuntimeSchedulesStatement,
  getRuntimeSchedulesStatement,
  listRuntimeScheduleRecords,
  pauseRuntimeSchedulesStatement,
  type RuntimeScheduleInput,
  type RuntimeScheduleRecord,
  readRuntimeScheduleRecords,
  rowsOf,
  type ScheduleWriteMode,
  type ScheduleWriteRow,
  type StoredJobOptions,
  writeRuntimeSchedulesStatement,
} from '../db/statements/runtime-schedules.js';
import { ENQUEUE_DEFAULTS, type EnqueueTarget, jobInsertRow } from './enqueue.js';
import type { EnqueueOptions } from './enqueue-options.js';
import type { PayloadInput, PayloadSchema } from './issues.js';
import type { JobDefinition } from './jobs.js';
import type { Nudger } from './nudge.js';
import { patternOf } from './runtime-schedule-tick.js';
import { cronZone, type MissedPolicy, SCHEDULE_DEFAULTS } from './schedules.js';

export type { RuntimeScheduleRecord, StoredJobOptions } from '../db/statements/runtime-schedules.js';

/** Options a run-time schedule's jobs are written with (the tick sets the dedupe key itself). */
export type RuntimeScheduleJobOptions = Pick<
  EnqueueOptions,
  'queue' | 'priority' | 'maxAttempts' | 'correlationId' | 'orderingKey' | 'concurrencyKey' | 'destination'
> & {
  /** Each job's deadline, this long after the tick enqueued it. @defaultValue none */
  deadlineMs?: number;
};

/**
 * A schedule the app creates at run time. Exactly one of `cron` and `everyMs`. The same missed
 * policy and DST rules as code schedules (defineSchedule).
 */
// biome-ignore lint/suspicious/noExplicitAny: a schedule of any kind.
export interface RuntimeScheduleSpec<S extends PayloadSchema = any> {
  /** The app's name for it, unique: 1-200 of A-Z a-z 0-9 _ . : / = + - (e.g. `digest:user-42`). */
  key: string;
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every handler type.
  job: JobDefinition<S, any>;
  /** Five fields (minute hour day month weekday), or six with seconds first; `@daily` and the like. */
  cron?: string;
  /** A fixed interval in milliseconds (≥ 1000), from `startAt` (default: when it was created). */
  everyMs?: number;
  /** An IANA time zone the cron is read in. @defaultValue 'UTC' */
  timezone?: string;
  /** Checked against the kind's schema now, stored, and given to every occurrence. @defaultValue {} */
  payload?: PayloadInput<S>;
  options?: RuntimeScheduleJobOptions;
  /** No occurrence before this time. @defaultValue none */
  startAt?: Date;
  /** No occurrence after this time: then the schedule stays, with no next run. @defaultValue none */
  endAt?: Date;
  /** @defaultValue 'last' */
  missed?: MissedPolicy;
  /** @defaultValue 300000 (5 minutes) */
  lateAfterMs?: number;
}

export interface SchedulerConfig {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** @defaultValue 262144 (as createEnqueuer) */
  maxPayloadBytes?: number;
  /** Told when a written schedule is next due (noteDue), for platforms whose idle workers sleep. @defaultValue none */
  nudger?: Nudger;
}

/** Test hook for writes: the clock candidates are computed from (the database's decides). */
export interface ScheduleWriteOptions {
  now?: Date;
}

export interface ScheduleWriteResult {
  key: string;
  /** created; exists (createSchedule: the key was taken, nothing written); updated; unchanged; missing (updateSchedule). */
  outcome: 'created' | 'exists' | 'updated' | 'unchanged' | 'missing';
  /** Its next run as written (null when paused or past its end); undefined when nothing was written. */
  nextRunAt?: Date | null;
}

export interface ApplySchedulesResult {
  created: string[];
  updated: string[];
  unchanged: string[];
  deleted: string[];
}

/** Statements for a neon-http `db.batch([...])` beside the caller's writes, and how to read their results. */
export interface PreparedScheduleChange<T> {
  statements: SQL[];
  read(results: readonly unknown[]): T;
}

export interface Scheduler {
  /** Creates a schedule, in `db`'s transaction when `db` is one; a taken key is left alone (`exists`). */
  createSchedule<S extends PayloadSchema>(
    db: EnqueueTarget,
    spec: RuntimeScheduleSpec<S>,
    options?: ScheduleWriteOptions,
  ): Promise<ScheduleWriteResult>;
  /** Creates it, or rewrites it when its definition differs (`unchanged`: nothing written). */
  upsertSchedule<S extends PayloadSchema>(
    db: EnqueueTarget,
    spec: RuntimeScheduleSpec<S>,
    options?: ScheduleWriteOptions,
  ): Promise<ScheduleWriteResult>;
  /** Rewrites an existing schedule (`missing` when there is none). */
  updateSchedule<S extends PayloadSchema>(
    db: EnqueueTarget,
    spec: RuntimeScheduleSpec<S>,
    options?: ScheduleWriteOptions,
  ): Promise<ScheduleWriteResult>;
  /** Stops it (true) until resumed; false when there is none or it was already paused. */
  pauseSchedule(db: EnqueueTarget, key: string, options?: ScheduleWriteOptions): Promise<boolean>;
  /** Resumes it from now: occurrences while it was paused are not made up. */
  resumeSchedule(db: EnqueueTarget, key: string, options?: ScheduleWriteOptions): Promise<boolean>;
  deleteSchedule(db: EnqueueTarget, key: string): Promise<boolean>;
  getSchedule(db: EnqueueTarget, key: string): Promise<RuntimeScheduleRecord | null>;
  /**
   * Makes the set `setId` exactly `specs`, in ONE statement: new keys created, changed ones
   * rewritten, unchanged ones not written at all, and the set's keys no longer listed deleted.
   * Idempotent: apply the same set again and nothing is written.
   */
  applySchedules(
    db: EnqueueTarget,
    setId: string,
    specs: readonly RuntimeScheduleSpec[],
    options?: ScheduleWriteOptions,
  ): Promise<ApplySchedulesResult>;
  /** The same writes as statements for a neon-http batch (validated now). */
  prepare: {
    createSchedule(
      spec: RuntimeScheduleSpec,
      options?: ScheduleWriteOptions,
    ): PreparedScheduleChange<ScheduleWriteResult>;
    upsertSchedule(
      spec: RuntimeScheduleSpec,
      options?: ScheduleWriteOptions,
    ): PreparedScheduleChange<ScheduleWriteResult>;
    updateSchedule(
      spec: RuntimeScheduleSpec,
      options?: ScheduleWriteOptions,
    ): PreparedScheduleChange<ScheduleWriteResult>;
    pauseSchedule(key: string, options?: ScheduleWriteOptions): PreparedScheduleChange<boolean>;
    resumeSchedule(key: string, options?: ScheduleWriteOptions): PreparedScheduleChange<boolean>;
    deleteSchedule(key: string): PreparedScheduleChange<boolean>;
    applySchedules(
      setId: string,
      specs: readonly RuntimeScheduleSpec[],
      options?: ScheduleWriteOptions,
    ): PreparedScheduleChange<ApplySchedulesResult>;
  };
}

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.:/=+-]{0,199}$/;
/** How far the caller's clock may be from the database's for a cron's next run to be placed at once. */
const CLOCK_SKEW_MS = 60_000;
const MAX_CANDIDATES = 250;

function checkKey(what: string, key: unknown): string {
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new InvalidOptionsError(
      `invalid ${what} ${JSON.stringify(key)}: use 1-200 characters of A-Z, a-z, 0-9 and _ . : / = + -, starting with a letter or digit`,
    );
  }
  return key;
}

function missedText(missed: MissedPolicy): string {
  return String(missed);
}

/** A spec as the row to write: every problem found is reported in one error. */
function toInput(
  spec: RuntimeScheduleSpec,
  maxPayloadBytes: number,
  now: Date,
  setId: string | null,
): RuntimeScheduleInput {
  const key = checkKey('schedule key', spec?.key);
  const where = `schedule ${key}`;
  const problems: string[] = [];
  if (!spec.job || typeof spec.job.kind !== 'string') throw new InvalidOptionsError(`${where}: job must be a job kind`);
  const hasCron = spec.cron !== undefined;
  const hasEvery = spec.everyMs !== undefined;
  if (hasCron === hasEvery) problems.push('give exactly one of cron and everyMs');
  const timezone = spec.timezone ?? SCHEDULE_DEFAULTS.timezone;
  if (timezone !== 'UTC' && !isTimeZone(timezone)) {
    problems.push(`unknown time zone ${JSON.stringify(timezone)} (use an IANA name like Europe/Berlin)`);
  }
  if (hasCron) {
    try {
      new Cron(spec.cron as string, cronZone(timezone === 'UTC' || isTimeZone(timezone) ? timezone : 'UTC'));
    } catch (err) {
      problems.push(`invalid cron ${JSON.stringify(spec.cron)}: ${(err as Error).message}`);
    }
  }
  if (hasEvery && !(Number.isInteger(spec.everyMs) && (spec.everyMs as number) >= 1_000)) {
    problems.push('everyMs must be a whole number of at least 1000');
  }
  for (const [name, date] of [
    ['startAt', spec.startAt],
    ['endAt', spec.endAt],
  ] as const) {
    if (date !== undefined && !(date instanceof Date && !Number.isNaN(date.getTime()))) {
      problems.push(`${name} must be a valid Date`);
    }
  }
  if (spec.startAt && spec.endAt && spec.endAt.getTime() <= spec.startAt.getTime()) {
    problems.push('endAt must be after startAt');
  }
  const missed = spec.missed ?? SCHEDULE_DEFAULTS.missed;
  if (!(missed === 'last' || missed === 'skip' || (Number.isInteger(missed) && missed >= 1 && missed <= 1000))) {
    problems.push("missed must be 'last', 'skip' or a whole number from 1 to 1000");
  }
  const lateAfterMs = spec.lateAfterMs ?? SCHEDULE_DEFAULTS.lateAfterMs;
  if (!(Number.isInteger(lateAfterMs) && lateAfterMs >= 1_000 && lateAfterMs <= 86_400_000)) {
    problems.push('lateAfterMs must be a whole number from 1000 to 86400000');
  }
  const options = spec.options ?? {};
  const { deadlineMs, ...enqueueOptions } = options;
  if (deadlineMs !== undefined && !(Number.isInteger(deadlineMs) && deadlineMs >= 1_000)) {
    problems.push('options.deadlineMs must be a whole number of at least 1000');
  }
  if (problems.length > 0) throw new InvalidOptionsError(`${where}: ${problems.join('; ')}`);
  // The payload checked by the kind's schema and the options resolved over the kind's defaults,
  // exactly as an enqueue of this kind would write them.
  const row = jobInsertRow(0, { job: spec.job, payload: spec.payload ?? {}, options: enqueueOptions }, maxPayloadBytes);
  const jobOptions: StoredJobOptions = {
    priority: row.priority,
    max_attempts: row.max_attempts,
    deadline_ms: deadlineMs ?? null,
    correlation_id: row.correlation_id,
    ordering_key: row.ordering_key,
    ordering_hold: row.ordering_hold,
    concurrency_key: row.concurrency_key,
    destination: row.destination,
  };
  const cron = hasCron ? (spec.cron as string) : null;
  const intervalMs = hasEvery ? (spec.everyMs as number) : null;
  return {
    key,
    kind: spec.job.kind,
    cron,
    interval_ms: intervalMs,
    timezone,
    payload_json: row.payload_json,
    queue: row.queue,
    job_options: jobOptions,
    start_at: spec.startAt?.toISOString() ?? null,
    end_at: spec.endAt?.toISOString() ?? null,
    missed: missedText(missed),
    late_after_ms: lateAfterMs,
    set_id: setId,
    candidates: cron ? cronCandidates(cron, timezone, spec.startAt ?? null, now) : [],
  };
}

/**
 * A cron's occurrences from a minute before `now` to a minute after (and at least one beyond): the
 * statement picks the first after the database's clock, so the caller's clock need only be within
 * a minute of it.
 */
function cronCandidates(cron: string, timezone: string, startAt: Date | null, now: Date): string[] {
  const pattern = patternOf({ cron, intervalMs: null, timezone, startAt, endAt: null, anchor: now });
  const out: string[] = [];
  const horizon = now.getTime() + CLOCK_SKEW_MS;
  let cursor: Date | null = new Date(now.getTime() - CLOCK_SKEW_MS);
  while (cursor && out.length < MAX_CANDIDATES) {
    const next = pattern.next(cursor);
    if (!next) break;
    out.push(next.toISOString());
    if (next.getTime() > horizon) break;
    cursor = next;
  }
  return out;
}

function writeOutcome(mode: ScheduleWriteMode, key: string, rows: readonly ScheduleWriteRow[]): ScheduleWriteResult {
  const row = rows.find((r) => r.key === key);
  if (row?.outcome === 'unchanged') return { key, outcome: 'unchanged' };
  if (row)
    return { key, outcome: row.outcome === 'created' ? 'created' : 'updated', nextRunAt: toDateOrNull(row.next_ms) };
  return { key, outcome: mode === 'create' ? 'exists' : mode === 'update' ? 'missing' : 'unchanged' };
}

function toDateOrNull(ms: number | string | null): Date | null {
  return ms === null ? null : new Date(Number(ms));
}

/** Builds the run-time schedule functions bound to a schema and payload limit. */
export function createScheduler(config: SchedulerConfig = {}): Scheduler {
  const schema = assertSchemaName(config.schema ?? DEFAULT_SCHEMA);
  const maxPayloadBytes = config.maxPayloadBytes ?? ENQUEUE_DEFAULTS.maxPayloadBytes;

  const prepareWrite = (mode: ScheduleWriteMode, spec: RuntimeScheduleSpec, options: ScheduleWriteOptions = {}) => {
    const input = toInput(spec, maxPayloadBytes, options.now ?? new Date(), null);
    return {
      input,
      statements: [writeRuntimeSchedulesStatement(schema, [input], { mode, now: options.now })],
      read: (raw: readonly unknown[]) => writeOutcome(mode, input.key, rowsOf<ScheduleWriteRow>(raw[0])),
    };
  };
  const prepareApply = (setId: string, specs: readonly RuntimeScheduleSpec[], options: ScheduleWriteOptions = {}) => {
    const set = checkKey('schedule set id', setId);
    const now = options.now ?? new Date();
    const inputs = specs.map((spec) => toInput(spec, maxPayloadBytes, now, set));
    const seen = new Set<string>();
    for (const input of inputs) {
      if (seen.has(input.key)) throw new InvalidOptionsError(`schedule set ${set} lists ${input.key} twice`);
      seen.add(input.key);
    }
    return {
      statements: [writeRuntimeSchedulesStatement(schema, inputs, { mode: 'upsert', set, now: options.now })],
      read: (raw: readonly unknown[]): ApplySchedulesResult => {
        const rows = rowsOf<ScheduleWriteRow>(raw[0]);
        const by = (outcome: string) => rows.filter((r) => r.outcome === outcome).map((r) => r.key);
        const written = new Set(rows.map((r) => r.key));
        return {
          created: by('created'),
          updated: by('updated'),
          unchanged: inputs.map((i) => i.key).filter((k) => !written.has(k)),
          deleted: by('deleted'),
        };
      },
    };
  };
  const prepareKeyed = (statement: SQL) => ({
    statements: [statement],
    read: (raw: readonly unknown[]) => rowsOf(raw[0]).length > 0,
  });
  const prepare: Scheduler['prepare'] = {
    createSchedule: (spec, options) => prepareWrite('create', spec, options),
    upsertSchedule: (spec, options) => prepareWrite('upsert', spec, options),
    updateSchedule: (spec, options) => prepareWrite('update', spec, options),
    pauseSchedule: (key, options) =>
      prepareKeyed(pauseRuntimeSchedulesStatement(schema, [checkKey('schedule key', key)], true, options?.now)),
    resumeSchedule: (key, options) =>
      prepareKeyed(pauseRuntimeSchedulesStatement(schema, [checkKey('schedule key', key)], false, options?.now)),
    deleteSchedule: (key) => prepareKeyed(deleteRuntimeSchedulesStatement(schema, [checkKey('schedule key', key)])),
    applySchedules: (setId, specs, options) => prepareApply(setId, specs, options),
  };

  const run = async <T>(target: EnqueueTarget, prepared: PreparedScheduleChange<T>): Promise<T> => {
    const db = executorOf(target);
    const raw: unknown[] = [];
    for (const statement of prepared.statements) raw.push(await queryRows(db, statement, schema));
    return prepared.read(raw);
  };
  /** Tells the nudger when a written schedule is next due (never fails the write). */
  const noteDue = async (queue: string, result: ScheduleWriteResult) => {
    if (!config.nudger?.noteDue || !result.nextRunAt) return;
    await config.nudger.noteDue([{ queue, at: result.nextRunAt }]).catch(() => {});
  };
  const write = async (
    mode: ScheduleWriteMode,
    target: EnqueueTarget,
    spec: RuntimeScheduleSpec,
    options?: ScheduleWriteOptions,
  ) => {
    const prepared = prepareWrite(mode, spec, options);
    const result = await run(target, prepared);
    await noteDue(prepared.input.queue, result);
    return result;
  };

  return {
    createSchedule: (db, spec, options) => write('create', db, spec, options),
    upsertSchedule: (db, spec, options) => write('upsert', db, spec, options),
    updateSchedule: (db, spec, options) => write('update', db, spec, options),
    pauseSchedule: (db, key, options) => run(db, prepare.pauseSchedule(key, options)),
    resumeSchedule: (db, key, options) => run(db, prepare.resumeSchedule(key, options)),
    deleteSchedule: (db, key) => run(db, prepare.deleteSchedule(key)),
    getSchedule: async (db, key) =>
      readRuntimeScheduleRecords(
        await queryRows(executorOf(db), getRuntimeSchedulesStatement(schema, [checkKey('schedule key', key)]), schema),
      )[0] ?? null,
    applySchedules: async (db, setId, specs, options) => run(db, prepare.applySchedules(setId, specs, options)),
    prepare,
  };
}

const defaultScheduler = createScheduler();
/** createSchedule() on the default `skiplock` schema (see Scheduler.createSchedule). */
export const createSchedule = defaultScheduler.createSchedule;
/** upsertSchedule() on the default schema. */
export const upsertSchedule = defaultScheduler.upsertSchedule;
/** updateSchedule() on the default schema. */
export const updateSchedule = defaultScheduler.updateSchedule;
/** pauseSchedule() on the default schema. */
export const pauseSchedule = defaultScheduler.pauseSchedule;
/** resumeSchedule() on the default schema. */
export const resumeSchedule = defaultScheduler.resumeSchedule;
/** deleteSchedule() on the default schema. */
export const deleteSchedule = defaultScheduler.deleteSchedule;
/** getSchedule() on the default schema. */
export const getSchedule = defaultScheduler.getSchedule;
/** applySchedules() on the default schema. */
export const applySchedules = defaultScheduler.applySchedules;

/** A page of run-time schedules by key (the CLI and the console; listSchedules merges them with the code's). */
export async function listRuntimeSchedules(
  conn: EnqueueTarget,
  options: { schema?: string; prefix?: string; after?: string; limit?: number } = {},
): Promise<RuntimeScheduleRecord[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  return listRuntimeScheduleRecords(executorOf(conn), schema, {
    prefix: options.prefix,
    after: options.after,
    limit: Math.min(Math.max(options.limit ?? 100, 1), 10_000),
  });
}

export {
  parseMissed,
  patternOf,
  planRuntimeTick,
  RUNTIME_TICK_DEFAULTS,
  type RuntimeTickOptions,
  type RuntimeTickResult,
  runRuntimeSchedules,
  type SchedulePattern,
} from './runtime-schedule-tick.js';
