// Schedule ticks from many invocations at once: a simulation of concurrent invocations, which
// depends on Postgres's locking, not on the driver that carries the statements. It runs once (pg);
// the statements themselves run on every driver in test/db/schedules.test.ts.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { defineSchedule, runSchedules } from '../../core/schedules.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('schedules_concurrency', (ctx) => {
  t = ctx;
});

const report = defineJob({ kind: 'nightly-report', payload: z.object({ day: z.string() }), handler: () => {} });
const nightly = defineSchedule({
  name: 'nightly',
  cron: '0 3 * * *',
  timezone: 'Europe/Berlin',
  job: report,
  payload: (occurrence) => ({ day: occurrence.toISOString().slice(0, 10) }),
  options: { priority: 5 },
});
const hourly = defineSchedule({ name: 'hourly', cron: '0 * * * *', job: report, payload: { day: 'any' } });
const tick = (now: string, schedules = [nightly, hourly], db = t.db) =>
  runSchedules(db, schedules, { schema: t.schema, now: new Date(now), logger: silentLogger });

describe(`schedules ticked at once by many invocations (${testDriver()})`, () => {
  it('8 ticks on separate connections at the same moments enqueue each occurrence once', async () => {
    const conns = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    try {
      await tick('2026-06-01T00:00:00Z');
      // Two days, a tick every 20 minutes, all 8 at once each time: 48 hourly occurrences and 2 nightly.
      for (let m = 20; m <= 48 * 60; m += 20) {
        const now = new Date(Date.parse('2026-06-01T00:00:00Z') + m * 60_000).toISOString();
        await Promise.all(conns.map((c) => tick(now, [nightly, hourly], c)));
        // As if they ran: a finished job no longer holds its dedupe key, so only the schedule's
        // compare-and-set stands between a second tick and a second job.
        await t.admin.query(
          `update "${t.schema}".jobs set state = 'completed', finished_at = now() where state = 'queued'`,
        );
      }
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
    const { rows } = await t.admin.query(
      `select kind, dedupe_key, count(*)::int as n from "${t.schema}".jobs group by 1, 2 having count(*) > 1`,
    );
    expect(rows).toEqual([]);
    const counts = await t.admin.query(
      `select payload->>'day' = 'any' as hourly, count(*)::int as n from "${t.schema}".jobs group by 1 order by 1`,
    );
    expect(counts.rows).toEqual([
      { hourly: false, n: 2 },
      { hourly: true, n: 48 },
    ]);
  });
});
