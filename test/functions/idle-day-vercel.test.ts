// The simulated idle day on Vercel (bench/idle/vercel.ts) meets IDLE-DESIGN's targets: no statement
// in an hour with nothing due, every job run within a minute of its due time but the raw insert,
// which the recheck finds.
import { describe, expect, it } from 'vitest';
import { simulateDay } from '../../bench/idle/vercel.js';
import { databaseUrl, testDriver } from '../helpers/db.js';

describe(`the simulated idle day on Vercel (${testDriver()})`, () => {
  it('sends nothing in an idle hour; runs each job within a minute, the raw insert by the recheck', async () => {
    const day = await simulateDay({ databaseUrl: databaseUrl() });
    expect(day.hours).toHaveLength(24);
    for (const hour of day.hours.filter((h) => h.due.length === 0)) {
      expect({ hour: hour.hour, statements: hour.statements }).toEqual({ hour: hour.hour, statements: 0 });
    }
    expect(day.hours.filter((h) => h.due.length === 0).length).toBeGreaterThanOrEqual(17);
    // Vercel's crons invoke the route every minute anyway: 60 worker ticks and 6 maintenance ticks.
    expect(day.hours[3]?.invocations).toBe(66);
    for (const job of day.jobs) {
      const limit = job.name === 'raw-insert' ? 360 * 60_000 : 60_000;
      expect({ name: job.name, late: (job.lateMs ?? Number.POSITIVE_INFINITY) <= limit }).toEqual({
        name: job.name,
        late: true,
      });
    }
  }, 120_000);
});
