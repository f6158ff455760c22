// Testing a schedule at a chosen time (docs/testing-your-app.md).

// #region schedule-at
import { connect, migrate, runSchedules } from 'skiplock';
import { expect, it } from 'vitest';
import { schedules } from './schedules.js';

it('the nightly report is enqueued once for 03:00 Berlin time', async () => {
  const db = connect({ connectionString: process.env.TEST_DATABASE_URL! });
  const schema = 'test_schedules';
  await migrate(db, { schema });
  // The first tick records the schedules from this moment (the database's clock, supplied)…
  await runSchedules(db, schedules, { schema, now: new Date('2026-06-01T00:00:00Z') });
  // …a tick after 03:00 CEST (01:00 UTC) enqueues that occurrence, once.
  const tick = await runSchedules(db, schedules, { schema, now: new Date('2026-06-01T01:05:00Z') });
  expect(tick.enqueued.filter((e) => e.schedule === 'daily-report').map((e) => e.occurrence.toISOString())).toEqual([
    '2026-06-01T01:00:00.000Z',
  ]);
  await db.close();
});
// #endregion schedule-at
