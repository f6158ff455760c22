// The simulated idle day on Lambda (bench/idle/lambda.ts) meets its targets: an hour with nothing
// due sends the database nothing, each job runs no later than the per-minute tick would have run
// it, and the raw-SQL insert no later than the safety net's recheck.
import { describe, expect, it } from 'vitest';
import { RECHECK_MS, simulateDay } from '../../bench/idle/lambda.js';
import { databaseUrl, testDriver } from '../helpers/db.js';

describe(`the simulated idle day on Lambda (${testDriver()})`, () => {
  it('leaves the database alone in every hour with nothing due; every job runs in time', async () => {
    const day = await simulateDay({ databaseUrl: databaseUrl() });
    expect(day.hours.map((h) => h.hour)).toEqual(Array.from({ length: 24 }, (_, h) => h));
    const idle = day.hours.filter((h) => h.due.length === 0);
    expect(idle.length).toBeGreaterThanOrEqual(15);
    for (const hour of idle) expect(hour, `hour ${hour.hour}`).toMatchObject({ statements: 0, invocations: 0 });
    // What was due is where the day says: the safety net every 6 hours, and each job's hour.
    for (const h of [0, 6, 12, 18]) expect(day.hours[h]?.due).toContain('recheck');
    expect(day.hours[10]?.due).toContain('retry');
    expect(day.hours[14]?.due).toContain('enqueue');
    expect(day.hours[18]?.due).toContain('schedule');
    expect(day.hours[20]?.due).toContain('raw-insert');
    expect(day.jobs.map((j) => j.name).sort()).toEqual(['enqueue', 'raw-insert', 'retry', 'schedule']);
    for (const job of day.jobs) {
      expect(job.ranAt, job.name).not.toBeNull();
      expect(job.lateMs, job.name).toBeGreaterThanOrEqual(0);
      expect(job.lateMs, job.name).toBeLessThanOrEqual(job.name === 'raw-insert' ? RECHECK_MS : 60_000);
    }
    // A day of one-off wake-ups costs a handful of invocations, not 24 × 60 ticks.
    expect(day.hours.reduce((sum, h) => sum + h.invocations, 0)).toBeLessThan(30);
  });
});
