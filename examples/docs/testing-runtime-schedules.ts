// Testing a run-time schedule at a chosen time (docs/testing-your-app.md), run by
// test/e2e/testing-subpath.test.ts as it is shown.

// #region runtime-schedule-at
import { connect, createScheduler, defineJob, migrate, runRuntimeSchedules } from 'skiplock';
import { expect, it } from 'vitest';
import { z } from 'zod';

const weeklyDigest = defineJob({
  kind: 'weekly-digest',
  payload: z.object({ userId: z.string() }),
  handler: async () => {},
});

it("a user's digest is enqueued once for Monday 09:00 in their time zone", async () => {
  const db = connect({ connectionString: process.env.TEST_DATABASE_URL! });
  const schema = `test_digests_${process.pid}`; // its own schema: a tick moves the rows for good
  await migrate(db, { schema });
  const scheduler = createScheduler({ schema });
  // Written as if at midnight UTC on Monday 2026-06-01 (the database's clock, supplied)…
  await scheduler.createSchedule(
    db,
    {
      key: 'digest:user-42',
      job: weeklyDigest,
      cron: '0 9 * * 1',
      timezone: 'Europe/Berlin',
      payload: { userId: '42' },
    },
    { now: new Date('2026-06-01T00:00:00Z') },
  );
  // …a tick after 09:00 CEST (07:00 UTC) enqueues that occurrence; the next tick nothing.
  const tick = await runRuntimeSchedules(db, { schema, now: new Date('2026-06-01T07:05:00Z') });
  expect(tick.enqueued.map((e) => [e.schedule, e.occurrence.toISOString()])).toEqual([
    ['digest:user-42', '2026-06-01T07:00:00.000Z'],
  ]);
  const again = await runRuntimeSchedules(db, { schema, now: new Date('2026-06-01T07:06:00Z') });
  expect(again.enqueued).toEqual([]);
  await db.close();
});
// #endregion runtime-schedule-at
