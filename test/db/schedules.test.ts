import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { jobInsertRow } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { defineSchedule, listSchedules, runSchedules } from '../../core/schedules.js';
import { createWorker } from '../../core/worker/index.js';
import { fireSchedule, syncSchedules } from '../../db/statements/schedules.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('schedules', (ctx) => {
  t = ctx;
});

const ran: string[] = [];
const report = defineJob({
  kind: 'nightly-report',
  payload: z.object({ day: z.string() }),
  handler: (p) => void ran.push(p.day),
});
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
const jobs = async () =>
  (
    await t.admin.query(
      `select kind, payload->>'day' as day, dedupe_key as key, priority, run_at from "${t.schema}".jobs order by id`,
    )
  ).rows;

describe(`schedules (${testDriver()})`, () => {
  it('the first tick records a schedule without running it; each later occurrence is enqueued once, by the clock supplied', async () => {
    expect((await tick('2026-06-01T00:10:00Z')).enqueued).toEqual([]);
    // 01:00 UTC: the hourly one, and the nightly one — 03:00 in Berlin (CEST) is 01:00 UTC.
    const one = await tick('2026-06-01T01:00:30Z');
    expect(one.enqueued.map((e) => [e.schedule, e.occurrence.toISOString()])).toEqual([
      ['nightly', '2026-06-01T01:00:00.000Z'],
      ['hourly', '2026-06-01T01:00:00.000Z'],
    ]);
    expect((await tick('2026-06-01T01:00:45Z')).enqueued).toEqual([]);
    // A day later, the next nightly one, with its payload and options.
    await tick('2026-06-02T01:00:10Z');
    const rows = await jobs();
    expect(rows.filter((r) => r.kind === 'nightly-report' && r.day !== 'any')).toEqual([
      expect.objectContaining({ day: '2026-06-01', key: 'nightly@2026-06-01T01:00:00.000Z', priority: 5 }),
      expect.objectContaining({ day: '2026-06-02', key: 'nightly@2026-06-02T01:00:00.000Z', priority: 5 }),
    ]);
    const listed = await listSchedules(t.db, { schema: t.schema, now: new Date('2026-06-02T01:00:10Z') });
    expect(listed.map((s) => [s.name, s.lastOccurrence?.toISOString(), s.nextOccurrence?.toISOString()])).toEqual([
      ['hourly', '2026-06-02T01:00:00.000Z', '2026-06-02T02:00:00.000Z'],
      ['nightly', '2026-06-02T01:00:00.000Z', '2026-06-03T01:00:00.000Z'],
    ]);
    expect(listed.find((s) => s.name === 'nightly')).toMatchObject({
      kind: 'nightly-report',
      timezone: 'Europe/Berlin',
    });
    expect(listed.find((s) => s.name === 'nightly')?.lastJobId).toBe(
      String(
        (
          await t.admin.query(
            `select max(id) as id from "${t.schema}".jobs where kind = 'nightly-report' and payload->>'day' = '2026-06-02'`,
          )
        ).rows[0].id,
      ),
    );
  });

  it('a tick that read the schedule before another fired it enqueues nothing, even after that job finished', async () => {
    await tick('2026-06-01T00:00:00Z', [hourly]);
    const now = new Date('2026-06-01T01:00:05Z');
    const defs = [{ name: 'hourly', cron: hourly.cron, timezone: hourly.timezone, kind: report.kind }];
    // Two ticks read the same last occurrence…
    const a = await syncSchedules(t.db.executor, t.schema, defs, now);
    const b = await syncSchedules(t.db.executor, t.schema, defs, now);
    const occurrence = new Date('2026-06-01T01:00:00Z');
    const row = () =>
      jobInsertRow(
        0,
        { job: report, payload: { day: 'any' }, options: { dedupe: { key: `hourly@${occurrence.toISOString()}` } } },
        1e6,
      );
    // …the second fires first, and its job runs to completion (its dedupe key is free again)…
    const first = await fireSchedule(t.db.executor, t.schema, {
      name: 'hourly',
      expected: b.last.get('hourly') as Date,
      last: occurrence,
      rows: [row()],
    });
    expect(first.fired).toBe(true);
    await t.admin.query(`update "${t.schema}".jobs set state = 'completed', finished_at = now()`);
    // …then the first fires with what it read: the compare-and-set refuses, nothing is inserted.
    const late = await fireSchedule(t.db.executor, t.schema, {
      name: 'hourly',
      expected: a.last.get('hourly') as Date,
      last: occurrence,
      rows: [row()],
    });
    expect(late).toEqual({ fired: false, ids: [] });
    expect((await jobs()).length).toBe(1);
  });

  it('after a gap, each missed policy does what it says; a changed definition is recorded', async () => {
    const make = (name: string, missed: 'last' | 'skip' | number) =>
      defineSchedule({ name, cron: '0 * * * *', job: report, payload: { day: name }, missed });
    const policies = [make('m-last', 'last'), make('m-skip', 'skip'), make('m-three', 3)];
    await tick('2026-06-01T00:00:00Z', policies);
    // Down until 05:10: 01:00 … 05:00 were missed (05:00 is 10 minutes late).
    const after = await tick('2026-06-01T05:10:00Z', policies);
    const byName = (n: string) => after.enqueued.filter((e) => e.schedule === n).map((e) => e.occurrence.getUTCHours());
    expect([byName('m-last'), byName('m-skip'), byName('m-three')]).toEqual([[5], [], [3, 4, 5]]);
    expect(after.skipped).toEqual([
      { schedule: 'm-last', count: 4 },
      { schedule: 'm-skip', count: 5 },
      { schedule: 'm-three', count: 2 },
    ]);
    // All three moved past 05:00: the 06:00 tick enqueues one each.
    expect((await tick('2026-06-01T06:00:05Z', policies)).enqueued).toHaveLength(3);
    const changed = defineSchedule({
      name: 'm-last',
      cron: '30 * * * *',
      timezone: 'Asia/Tokyo',
      job: report,
      payload: { day: 'x' },
    });
    await tick('2026-06-01T06:10:00Z', [changed]);
    const record = (await listSchedules(t.db, { schema: t.schema })).find((s) => s.name === 'm-last');
    expect(record).toMatchObject({ cron: '30 * * * *', timezone: 'Asia/Tokyo' });
  });

  it('a payload function that throws fails its schedule only, logged, and moves nothing', async () => {
    const broken = defineSchedule({
      name: 'broken',
      cron: '0 * * * *',
      job: report,
      payload: () => {
        throw new Error('no data source configured');
      },
    });
    await tick('2026-06-01T00:00:00Z', [broken, hourly]);
    const result = await tick('2026-06-01T01:00:10Z', [broken, hourly]);
    expect(result.failed).toEqual([{ schedule: 'broken', error: 'no data source configured' }]);
    expect(result.enqueued.map((e) => e.schedule)).toEqual(['hourly']);
    // Still due next time: nothing was lost.
    const again = await tick('2026-06-01T01:00:20Z', [broken]);
    expect(again.failed).toHaveLength(1);
  });

  it('a worker ticks its schedules as an invocation starts, and runs what they enqueued', async () => {
    ran.length = 0;
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [report],
      schedules: [hourly],
      scheduleTickMs: 0,
      logger: silentLogger,
    });
    const first = await worker.runInvocation({ remainingMs: 120_000 });
    expect(first.scheduled).toBe(0); // recorded now: its first occurrence is the next hour
    // Three hours ago, as far as the schedule knows (the database's clock is real here).
    await t.admin.query(
      `update "${t.schema}".schedules set last_occurrence = date_trunc('hour', now()) - interval '3 hours'`,
    );
    const second = await worker.runInvocation({ remainingMs: 120_000 });
    expect(second).toMatchObject({ scheduled: 1, completed: 1 }); // missed: 'last' — the newest once
    expect(ran).toEqual(['any']);
    const third = await worker.runInvocation({ remainingMs: 120_000 });
    expect(third).toMatchObject({ scheduled: 0, completed: 0 });
  });
});
