import { describe, expect, it } from 'vitest';
import { cronMatches, parseCron } from '../../cli/cron.js';

describe('cron schedules (npm run dev)', () => {
  const at = (iso: string) => new Date(iso);
  it('matches every minute, steps, ranges and lists in UTC', () => {
    expect(cronMatches(parseCron('* * * * *'), at('2026-11-21T21:13:00Z'))).toBe(true);
    const everyTen = parseCron('*/10 * * * *');
    expect(cronMatches(everyTen, at('2026-11-21T21:20:00Z'))).toBe(true);
    expect(cronMatches(everyTen, at('2026-11-21T21:21:00Z'))).toBe(false);
    const weekdays = parseCron('0 9-17/4 * * 1-5');
    expect(cronMatches(weekdays, at('2026-11-23T13:00:00Z'))).toBe(true); // Monday 13:00
    expect(cronMatches(weekdays, at('2026-11-22T13:00:00Z'))).toBe(false); // Sunday
    expect(cronMatches(parseCron('5,35 * * * *'), at('2026-11-21T02:35:00Z'))).toBe(true);
  });
  it('rejects malformed expressions', () => {
    for (const bad of ['* * * *', '61 * * * *', '*/0 * * * *', 'x * * * *', '5-1 * * * *']) {
      expect(() => parseCron(bad)).toThrow(/cron/);
    }
  });
});
