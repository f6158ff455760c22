import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { defineSchedule, dueOccurrences, type ScheduleOptions } from '../../core/schedules.js';

const report = defineJob({ kind: 'report', payload: z.object({ day: z.string().optional() }) });
const schedule = (o: Partial<ScheduleOptions>) => defineSchedule({ name: 's', cron: '0 3 * * *', job: report, ...o });
const iso = (dates: Date[]) => dates.map((d) => d.toISOString());

/** Ticks every `stepMs` from `from` to `to`, as a worker would; returns every occurrence enqueued. */
function tickThrough(def: ReturnType<typeof defineSchedule>, from: string, to: string, stepMs: number): string[] {
  let last = new Date(from);
  const enqueued: Date[] = [];
  for (let t = last.getTime() + stepMs; t <= new Date(to).getTime(); t += stepMs) {
    const { enqueue, through } = dueOccurrences(def, last, new Date(t));
    enqueued.push(...enqueue);
    if (through) last = through;
  }
  return iso(enqueued);
}

describe('schedules: occurrences', () => {
  it('a daily job in Europe/Berlin runs once a day across both DST changes, at its wall-clock time', () => {
    // 02:30 does not exist on 29 March 2026 (clocks jump 02:00 → 03:00) and happens twice on
    // 25 October (03:00 → 02:00). Ticks every 10 minutes for three days around each.
    const daily = schedule({ cron: '30 2 * * *', timezone: 'Europe/Berlin' });
    expect(tickThrough(daily, '2026-03-27T12:00:00Z', '2026-03-30T12:00:00Z', 600_000)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:30:00.000Z', // the missing 02:30: run at 03:30 CEST, once
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
    expect(tickThrough(daily, '2026-10-23T12:00:00Z', '2026-10-26T12:00:00Z', 600_000)).toEqual([
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // the first of the two 02:30s only
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
  });

  it('an hourly job across the spring change counts the one instant two wall-clock times map to once', () => {
    const hourly = schedule({ cron: '30 * * * *', timezone: 'Europe/Berlin' });
    expect(tickThrough(hourly, '2026-03-28T23:45:00Z', '2026-03-29T03:00:00Z', 60_000)).toEqual([
      '2026-03-29T00:30:00.000Z',
      '2026-03-29T01:30:00.000Z',
      '2026-03-29T02:30:00.000Z',
    ]);
  });

  it('an hourly job in Europe/Berlin runs the repeated autumn hour once: a 120-minute gap (documented)', () => {
    const hourly = schedule({ cron: '0 * * * *', timezone: 'Europe/Berlin' });
    expect(tickThrough(hourly, '2026-10-24T23:30:00Z', '2026-10-25T03:30:00Z', 60_000)).toEqual([
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T02:00:00.000Z', // 03:00 CET: the second 02:00 (01:00 UTC) does not run
      '2026-10-25T03:00:00.000Z',
    ]);
    // In UTC the same schedule runs every 60 minutes.
    expect(
      tickThrough(schedule({ cron: '0 * * * *' }), '2026-10-24T23:30:00Z', '2026-10-25T03:30:00Z', 60_000),
    ).toHaveLength(4);
  });

  it('in UTC, ticks every minute for a day: an every-15-minutes job runs 96 times, never twice', () => {
    const q = schedule({ cron: '*/15 * * * *' });
    const runs = tickThrough(q, '2026-06-01T00:00:00Z', '2026-06-02T00:00:00Z', 60_000);
    expect(runs).toHaveLength(96);
    expect(new Set(runs).size).toBe(96);
  });

  it('missed occurrences after a gap: last runs the newest once, skip none, N the newest N', () => {
    const last = new Date('2026-06-01T00:00:00Z');
    // Down from 00:00 to 05:10: the hourly job missed 01:00 … 05:00 (05:00 is 10 minutes late).
    const now = new Date('2026-06-01T05:10:00Z');
    const hourly = (missed: ScheduleOptions['missed']) => schedule({ cron: '0 * * * *', missed });
    expect(iso(dueOccurrences(hourly('last'), last, now).enqueue)).toEqual(['2026-06-01T05:00:00.000Z']);
    expect(iso(dueOccurrences(hourly('skip'), last, now).enqueue)).toEqual([]);
    expect(iso(dueOccurrences(hourly(3), last, now).enqueue)).toEqual([
      '2026-06-01T03:00:00.000Z',
      '2026-06-01T04:00:00.000Z',
      '2026-06-01T05:00:00.000Z',
    ]);
    expect(dueOccurrences(hourly('last'), last, now).due).toBe(5);
    // Each moves the schedule past all of them.
    expect(dueOccurrences(hourly('skip'), last, now).through?.toISOString()).toBe('2026-06-01T05:00:00.000Z');
    // On time (within lateAfterMs, 5 minutes by default), skip still runs it; with N, on-time ones
    // come on top of the N late ones.
    const onTime = new Date('2026-06-01T05:04:00Z');
    expect(iso(dueOccurrences(hourly('skip'), last, onTime).enqueue)).toEqual(['2026-06-01T05:00:00.000Z']);
    expect(iso(dueOccurrences(hourly(2), last, onTime).enqueue)).toEqual([
      '2026-06-01T03:00:00.000Z',
      '2026-06-01T04:00:00.000Z',
      '2026-06-01T05:00:00.000Z',
    ]);
    expect(dueOccurrences(hourly('last'), last, new Date('2026-06-01T00:59:59Z'))).toEqual({
      enqueue: [],
      through: null,
      due: 0,
    });
  });

  it('refuses a bad cron, time zone, policy, payload or name with a clear ConfigError', () => {
    const bad: [Partial<ScheduleOptions>, RegExp][] = [
      [{ cron: '61 * * * *' }, /schedule s: invalid cron "61 \* \* \* \*": .*minute/],
      [{ timezone: 'Mars/Base' }, /unknown time zone "Mars\/Base"/],
      [{ missed: 0 }, /missed must be 'last', 'skip' or a whole number/],
      [{ lateAfterMs: 10 }, /lateAfterMs must be a whole number from 1000/],
      [{ payload: { day: 7 } as never }, /the payload does not match report's schema/],
      [{ name: 'no spaces please' }, /invalid schedule name/],
    ];
    for (const [options, message] of bad) {
      expect(() => schedule(options)).toThrow(ConfigError);
      expect(() => schedule(options)).toThrow(message);
    }
  });
});
