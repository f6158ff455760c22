// Schedule commands: list the recurring schedules (code and run-time), tick them by hand, and
// create, pause, resume, show and delete run-time ones.

import { ConfigError } from '../base/errors.js';
import {
  createScheduler,
  parseMissed,
  type RuntimeScheduleSpec,
  runRuntimeSchedules,
} from '../core/runtime-schedules.js';
import { listSchedules, runSchedules, type ScheduleStatus } from '../core/schedules.js';
import type { CommandContext } from './command-context.js';
import { table, when } from './format.js';
import { EXIT, UsageError } from './io.js';

export const SCHEDULE_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  async schedules({ conn, schema, emit, schedules, o }) {
    const limit = o.limit === undefined ? undefined : Number(o.limit);
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1))
      throw new UsageError('--limit must be a whole number');
    const rows = await listSchedules(conn, {
      schema,
      defined: schedules,
      runtimeLimit: limit,
    });
    emit(
      rows.length === 0
        ? `no schedules recorded${schedules ? ' or defined' : ' (pass --jobs to list the ones the module defines)'}`
        : table(
            rows.map((s) => ({
              schedule: s.name,
              cron: pattern(s),
              'time zone': s.timezone,
              kind: s.kind,
              last: s.lastOccurrence ? when(s.lastOccurrence) : s.source === 'runtime' ? '' : 'not recorded yet',
              next: s.pausedAt ? `paused since ${when(s.pausedAt)}` : when(s.nextOccurrence),
              'last job': s.lastJobId ?? '',
              source: s.source,
            })),
            ['schedule', 'cron', 'time zone', 'kind', 'last', 'next', 'last job', 'source'],
          ),
      rows,
    );
    return EXIT.ok;
  },
  async 'schedules tick'({ conn, schema, emit, schedules, rest }) {
    if (rest.length > 0) throw new UsageError('schedules tick takes no arguments');
    // The module's schedules (with --jobs), then the run-time ones, as a worker's tick would.
    const result = schedules?.length
      ? await runSchedules(conn, schedules, { schema })
      : { enqueued: [], skipped: [], failed: [] };
    const runtime = await runRuntimeSchedules(conn, { schema });
    const lines = [
      ...[...result.enqueued, ...runtime.enqueued].map(
        (e) => `enqueued ${e.schedule} @ ${e.occurrence.toISOString()} as job ${e.jobId ?? '(held by a live job)'}`,
      ),
      ...[...result.skipped, ...runtime.skipped].map((s) => `skipped ${s.count} missed occurrence(s) of ${s.schedule}`),
      ...result.failed.map((f) => `failed ${f.schedule}: ${f.error}`),
    ];
    const none = schedules?.length
      ? 'nothing was due'
      : 'no run-time schedule was due (pass --jobs to tick the code schedules too)';
    emit(lines.length === 0 ? none : lines.join('\n'), { ...result, runtime });
    return result.failed.length > 0 ? EXIT.refused : EXIT.ok;
  },
  async 'schedules create'({ conn, schema, registry, o, rest, emit }) {
    const [key, kind, ...extra] = rest;
    if (!key || !kind || extra.length > 0) throw new UsageError('schedules create needs <key> <kind>');
    if (!registry) {
      throw new ConfigError(
        'schedules create needs your job kinds: pass --jobs <module> (or set SKIPLOCK_JOBS_MODULE)',
      );
    }
    const spec: RuntimeScheduleSpec = { key, job: registry.get(kind) };
    if (typeof o.cron === 'string') spec.cron = o.cron;
    if (typeof o.every === 'string') spec.everyMs = numberOf('every', o.every);
    if (typeof o.timezone === 'string') spec.timezone = o.timezone;
    if (typeof o.payload === 'string') spec.payload = jsonOf(o.payload);
    if (typeof o.start === 'string') spec.startAt = dateOf('start', o.start);
    if (typeof o.end === 'string') spec.endAt = dateOf('end', o.end);
    if (typeof o.missed === 'string') spec.missed = parseMissed(o.missed);
    const options: NonNullable<RuntimeScheduleSpec['options']> = {};
    if (typeof o.queue === 'string') options.queue = o.queue;
    if (typeof o.priority === 'string') options.priority = numberOf('priority', o.priority);
    if (typeof o['max-attempts'] === 'string') options.maxAttempts = numberOf('max-attempts', o['max-attempts']);
    if (Object.keys(options).length > 0) spec.options = options;
    const scheduler = createScheduler({ schema });
    const result = o.replace ? await scheduler.upsertSchedule(conn, spec) : await scheduler.createSchedule(conn, spec);
    const next = result.nextRunAt ? `, next run ${when(result.nextRunAt)}` : '';
    emit(
      result.outcome === 'exists'
        ? `schedule ${key} exists: nothing written (--replace rewrites it)`
        : `${result.outcome} schedule ${key}${next}`,
      result,
    );
    return result.outcome === 'exists' ? EXIT.refused : EXIT.ok;
  },
  async 'schedules show'({ conn, schema, rest, emit }) {
    const key = oneKey('show', rest);
    const schedule = await createScheduler({ schema }).getSchedule(conn, key);
    if (!schedule) {
      emit(`no run-time schedule ${key}`, null);
      return EXIT.refused;
    }
    const lines = Object.entries(schedule).map(([name, value]) => `${name.padEnd(15)} ${show(value)}`);
    emit(lines.join('\n'), schedule);
    return EXIT.ok;
  },
  async 'schedules pause'({ conn, schema, rest, emit }) {
    return changed(emit, await createScheduler({ schema }).pauseSchedule(conn, oneKey('pause', rest)), 'paused', rest);
  },
  async 'schedules resume'({ conn, schema, rest, emit }) {
    return changed(
      emit,
      await createScheduler({ schema }).resumeSchedule(conn, oneKey('resume', rest)),
      'resumed',
      rest,
    );
  },
  async 'schedules delete'({ conn, schema, rest, emit }) {
    return changed(
      emit,
      await createScheduler({ schema }).deleteSchedule(conn, oneKey('delete', rest)),
      'deleted',
      rest,
    );
  },
};

export const SCHEDULE_SUBCOMMANDS = ['schedules'];

/** A schedule's pattern as the list shows it: its cron, or `every 15m`. */
export function pattern(s: Pick<ScheduleStatus, 'cron' | 'intervalMs'>): string {
  if (s.cron !== null) return s.cron;
  const ms = s.intervalMs ?? 0;
  const units: [number, string][] = [
    [86_400_000, 'd'],
    [3_600_000, 'h'],
    [60_000, 'm'],
    [1_000, 's'],
  ];
  const unit = units.find(([size]) => ms % size === 0);
  return unit ? `every ${ms / unit[0]}${unit[1]}` : `every ${ms}ms`;
}

function oneKey(command: string, rest: readonly string[]): string {
  if (rest.length !== 1) throw new UsageError(`schedules ${command} needs one <key>`);
  return rest[0] as string;
}

function changed(
  emit: (human: string, data: unknown) => void,
  done: boolean,
  verb: string,
  rest: readonly string[],
): number {
  const key = rest[0] as string;
  emit(done ? `${verb} schedule ${key}` : `nothing ${verb}: no run-time schedule ${key} in that state`, {
    key,
    [verb]: done,
  });
  return done ? EXIT.ok : EXIT.refused;
}

function numberOf(name: string, text: string): number {
  const n = Number(text);
  if (!Number.isFinite(n)) throw new UsageError(`--${name} must be a number`);
  return n;
}

function dateOf(name: string, text: string): Date {
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) throw new UsageError(`--${name} must be a date (ISO 8601)`);
  return d;
}

function jsonOf(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError('--payload is not valid JSON');
  }
}

function show(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (value === null) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}
