import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidOptionsError, PayloadValidationError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import {
  createScheduler,
  planRuntimeTick,
  type RuntimeScheduleSpec,
  runRuntimeSchedules,
} from '../../core/runtime-schedules.js';
import { defineSchedule, dueOccurrences, listSchedules } from '../../core/schedules.js';
import type { SkiplockDb } from '../../db/connect.js';
import { claimDueRuntimeSchedules, fireRuntimeSchedules } from '../../db/statements/runtime-schedules.js';
import { nextDue } from '../../db/statements/wake.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { countStatements } from '../helpers/statements.js';

// Schedules the app creates at run time: data in runtime_schedules, ticked by every worker with
// two statements per round (claim, then fire with a compare-and-set), on every driver.
let t: TestContext;
useTestSchema('runtime-schedules', (ctx) => {
  t = ctx;
});

const digest = defineJob({
  kind: 'digest',
  queue: 'mail',
  payload: z.object({ userId: z.string() }),
  handler: () => {},
});
const s = () => createScheduler({ schema: t.schema });
const at = (iso: string) => new Date(iso);
const tick = (now: string, db: SkiplockDb = t.db, limit?: number) =>
  runRuntimeSchedules(db, { schema: t.schema, now: at(now), logger: silentLogger, limit });
const jobKeys = async () =>
  (await t.admin.query(`select dedupe_key from "${t.schema}".jobs order by dedupe_key`)).rows.map(
    (r) => r.dedupe_key as string,
  );
const row = async (key: string) =>
  (
    await t.admin.query(
      `select version::int, next_run_at, paused_at, updated_at, last_occurrence from "${t.schema}".runtime_schedules where key = $1`,
      [key],
    )
  ).rows[0];
const spec = (key: string, extra: Partial<RuntimeScheduleSpec> = {}): RuntimeScheduleSpec => ({
  key,
  job: digest,
  cron: '0 9 * * 1',
  timezone: 'Europe/Berlin',
  payload: { userId: key },
  ...extra,
});

describe(`run-time schedules in the caller's transaction (${testDriver()})`, () => {
  if (testDriver() !== 'neon-http') {
    it('a schedule created in a transaction that rolls back does not exist; one that commits does', async () => {
      await expect(
        t.db.db.transaction(async (tx) => {
          await s().createSchedule(tx, spec('digest:user-1'));
          throw new Error('signup failed');
        }),
      ).rejects.toThrow('signup failed');
      expect(await s().getSchedule(t.db, 'digest:user-1')).toBeNull();
      const created = await t.db.db.transaction(async (tx) =>
        s().createSchedule(tx, spec('digest:user-1'), { now: at('2026-06-01T10:00:00Z') }),
      );
      expect(created).toEqual({
        key: 'digest:user-1',
        outcome: 'created',
        // Monday 2026-06-08 09:00 in Berlin (CEST).
        nextRunAt: at('2026-06-08T07:00:00Z'),
      });
      expect(await s().getSchedule(t.db, 'digest:user-1')).toMatchObject({
        kind: 'digest',
        queue: 'mail',
        payload: { userId: 'digest:user-1' },
        version: 1,
        nextRunAt: at('2026-06-08T07:00:00Z'),
      });
    });
  } else {
    it('in the caller’s batch: a failing batch writes nothing; a batch that commits writes it', async () => {
      const db = t.db.db as unknown as NeonHttpDatabase;
      const failing = s().prepare.createSchedule(spec('digest:user-1'));
      await expect(
        db.batch([...failing.statements.map((x) => db.execute(x)), db.execute(sql`select 1 / 0`)] as never),
      ).rejects.toThrow();
      expect(await s().getSchedule(t.db, 'digest:user-1')).toBeNull();
      const ok = s().prepare.createSchedule(spec('digest:user-1'), { now: at('2026-06-01T10:00:00Z') });
      const raw = await db.batch([db.execute(sql`select 1`), ...ok.statements.map((x) => db.execute(x))] as never);
      expect(ok.read((raw as unknown[]).slice(1))).toMatchObject({ outcome: 'created' });
      expect((await s().getSchedule(t.db, 'digest:user-1'))?.version).toBe(1);
    });
  }

  it('create leaves a taken key alone; update rewrites only a changed definition; upsert does both', async () => {
    const now = { now: at('2026-06-01T10:00:00Z') };
    expect((await s().createSchedule(t.db, spec('k1'), now)).outcome).toBe('created');
    expect((await s().createSchedule(t.db, spec('k1', { cron: '0 8 * * *' }), now)).outcome).toBe('exists');
    expect((await s().updateSchedule(t.db, spec('k1'), now)).outcome).toBe('unchanged');
    expect((await s().updateSchedule(t.db, spec('nope'), now)).outcome).toBe('missing');
    const updated = await s().updateSchedule(t.db, spec('k1', { cron: '0 8 * * *' }), now);
    expect(updated).toEqual({ key: 'k1', outcome: 'updated', nextRunAt: at('2026-06-02T06:00:00Z') });
    expect((await row('k1')).version).toBe(2);
    expect((await s().upsertSchedule(t.db, spec('k2'), now)).outcome).toBe('created');
    expect((await s().upsertSchedule(t.db, spec('k2'), now)).outcome).toBe('unchanged');
    expect((await s().upsertSchedule(t.db, spec('k2', { payload: { userId: 'x' } }), now)).outcome).toBe('updated');
    expect(await s().deleteSchedule(t.db, 'k2')).toBe(true);
    expect(await s().deleteSchedule(t.db, 'k2')).toBe(false);
  });
});

describe(`the tick (${testDriver()})`, () => {
  it('enqueues each occurrence once, with the stored payload and options, and moves to the next', async () => {
    await s().createSchedule(
      t.db,
      spec('digest:user-7', { cron: '0 * * * *', timezone: 'UTC', options: { priority: 7 } }),
      { now: at('2026-06-01T10:10:00Z') },
    );
    expect((await tick('2026-06-01T10:59:59Z')).enqueued).toEqual([]);
    const one = await tick('2026-06-01T11:00:05Z');
    expect(one.enqueued.map((e) => [e.schedule, e.occurrence.toISOString()])).toEqual([
      ['digest:user-7', '2026-06-01T11:00:00.000Z'],
    ]);
    expect(one.statements).toBe(2);
    expect((await tick('2026-06-01T11:00:30Z')).enqueued).toEqual([]);
    const { rows } = await t.admin.query(
      `select kind, queue, priority, payload, dedupe_key from "${t.schema}".jobs order by id`,
    );
    expect(rows).toEqual([
      {
        kind: 'digest',
        queue: 'mail',
        priority: 7,
        payload: { userId: 'digest:user-7' },
        dedupe_key: 'digest:user-7@2026-06-01T11:00:00.000Z',
      },
    ]);
    expect((await row('digest:user-7')).next_run_at).toEqual(at('2026-06-01T12:00:00Z'));
  });

  it('with nothing due, a tick is one statement that claims nothing', async () => {
    await s().createSchedule(t.db, spec('later'), { now: at('2026-06-01T10:00:00Z') });
    const { result, statements } = await countStatements(testDriver(), () => tick('2026-06-01T10:00:01Z'));
    expect([result.claimed, statements]).toEqual([0, 1]);
  });

  it('claims in rounds of `limit`: another round only when more are due', async () => {
    const every5 = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => spec(`r-${from + i}`, { cron: '*/5 * * * *', timezone: 'UTC' }));
    await s().applySchedules(t.db, 'rounds', every5(20), { now: at('2026-06-01T10:01:00Z') });
    const exact = await tick('2026-06-01T10:05:01Z', t.db, 20);
    expect([exact.enqueued.length, exact.statements]).toEqual([20, 2]);
    await s().applySchedules(t.db, 'rounds', every5(30), { now: at('2026-06-01T10:06:00Z') });
    const more = await tick('2026-06-01T10:10:01Z', t.db, 20);
    expect([more.enqueued.length, more.statements]).toEqual([30, 4]);
  });

  it('4 ticks at once over their own connections on 200 due schedules enqueue exactly 200 jobs', async () => {
    const specs = Array.from({ length: 200 }, (_, i) =>
      spec(`user-${i}`, { cron: '*/5 * * * *', timezone: 'UTC', payload: { userId: `u${i}` } }),
    );
    await s().applySchedules(t.db, 'users', specs, { now: at('2026-06-01T10:01:00Z') });
    const dbs = Array.from({ length: 4 }, () => openDb());
    try {
      // Small claims, so that the ticks interleave round by round.
      const results = await Promise.all(dbs.map((db) => tick('2026-06-01T10:05:01Z', db, 20)));
      const enqueued = results.flatMap((r) => r.enqueued);
      expect(enqueued).toHaveLength(200);
      // Each tick did part of the work, and together every schedule once.
      expect(new Set(enqueued.map((e) => e.schedule)).size).toBe(200);
      const keys = await jobKeys();
      expect(keys).toHaveLength(200);
      expect(new Set(keys).size).toBe(200);
      // And again, at the next occurrence: 200 more.
      await Promise.all(dbs.map((db) => tick('2026-06-01T10:10:02Z', db, 20)));
      expect(await jobKeys()).toHaveLength(400);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  it('a tick that outlived its claim enqueues nothing once another tick moved the schedule, even after that job finished', async () => {
    await s().createSchedule(t.db, spec('slow', { cron: '0 * * * *', timezone: 'UTC' }), {
      now: at('2026-06-01T10:10:00Z'),
    });
    const now = at('2026-06-01T11:00:01Z');
    const first = await claimDueRuntimeSchedules(t.db.executor, t.schema, { limit: 10, leaseMs: 30_000, now });
    expect(first.rows.map((r) => r.key)).toEqual(['slow']);
    // While the claim holds, another tick passes over it.
    expect((await tick('2026-06-01T11:00:10Z')).claimed).toBe(0);
    // The claim runs out: another tick takes it and enqueues the occurrence; its job completes.
    expect((await tick('2026-06-01T11:00:40Z')).enqueued).toHaveLength(1);
    await t.admin.query(`update "${t.schema}".jobs set state = 'completed', finished_at = now()`);
    const late = await fireRuntimeSchedules(t.db.executor, t.schema, planRuntimeTick(first.rows, now, silentLogger));
    expect(late.moved.size).toBe(0);
    expect(await jobKeys()).toEqual(['slow@2026-06-01T11:00:00.000Z']);
  });

  it('an edit between the claim and the fire wins: nothing is enqueued for it by that tick', async () => {
    await s().createSchedule(t.db, spec('edited', { cron: '0 * * * *', timezone: 'UTC' }), {
      now: at('2026-06-01T10:10:00Z'),
    });
    const now = at('2026-06-01T11:00:01Z');
    const claimed = await claimDueRuntimeSchedules(t.db.executor, t.schema, { limit: 10, leaseMs: 30_000, now });
    const plan = planRuntimeTick(claimed.rows, now, silentLogger);
    expect(plan.rows).toHaveLength(1);
    await s().updateSchedule(t.db, spec('edited', { cron: '30 * * * *', timezone: 'UTC' }), { now });
    const fired = await fireRuntimeSchedules(t.db.executor, t.schema, plan);
    expect(fired.moved.size).toBe(0);
    expect(await jobKeys()).toEqual([]);
    // The edit's definition stands, and its claim was dropped: the next tick runs it at :30.
    expect(await row('edited')).toMatchObject({ version: 2, next_run_at: at('2026-06-01T11:30:00Z') });
    expect((await tick('2026-06-01T11:30:02Z')).enqueued.map((e) => e.occurrence.toISOString())).toEqual([
      '2026-06-01T11:30:00.000Z',
    ]);
    // A delete between claim and fire: the same.
    const again = await claimDueRuntimeSchedules(t.db.executor, t.schema, {
      limit: 10,
      leaseMs: 30_000,
      now: at('2026-06-01T12:30:01Z'),
    });
    await s().deleteSchedule(t.db, 'edited');
    const gone = await fireRuntimeSchedules(
      t.db.executor,
      t.schema,
      planRuntimeTick(again.rows, at('2026-06-01T12:30:01Z'), silentLogger),
    );
    expect([gone.moved.size, (await jobKeys()).length]).toEqual([0, 1]);
  });

  it('pause stops it; resume starts again from now, without making up what it missed', async () => {
    await s().createSchedule(t.db, spec('p', { cron: '0 * * * *', timezone: 'UTC' }), {
      now: at('2026-06-01T10:10:00Z'),
    });
    expect(await s().pauseSchedule(t.db, 'p', { now: at('2026-06-01T10:20:00Z') })).toBe(true);
    expect(await s().pauseSchedule(t.db, 'p')).toBe(false);
    expect(await row('p')).toMatchObject({ next_run_at: null, paused_at: at('2026-06-01T10:20:00Z') });
    expect((await tick('2026-06-01T14:00:05Z')).claimed).toBe(0);
    // An upsert while paused keeps it paused.
    await s().upsertSchedule(t.db, spec('p', { cron: '15 * * * *', timezone: 'UTC' }), {
      now: at('2026-06-01T14:10:00Z'),
    });
    expect((await row('p')).next_run_at).toBeNull();
    expect(await s().resumeSchedule(t.db, 'p', { now: at('2026-06-01T14:20:00Z') })).toBe(true);
    // The tick places it on its next occurrence (14:15 passed while it was paused).
    expect((await tick('2026-06-01T14:20:01Z')).enqueued).toEqual([]);
    expect((await row('p')).next_run_at).toEqual(at('2026-06-01T15:15:00Z'));
    expect((await tick('2026-06-01T15:15:01Z')).enqueued).toHaveLength(1);
  });

  it('start and end: nothing before the start, nothing after the end, then no next run', async () => {
    await s().createSchedule(
      t.db,
      spec('window', {
        cron: '0 12 * * *',
        timezone: 'UTC',
        startAt: at('2026-06-03T00:00:00Z'),
        endAt: at('2026-06-04T12:00:00Z'),
      }),
      { now: at('2026-06-01T10:00:00Z') },
    );
    expect((await row('window')).next_run_at).toEqual(at('2026-06-03T12:00:00Z'));
    await tick('2026-06-03T12:00:01Z');
    await tick('2026-06-04T12:00:01Z');
    expect((await row('window')).next_run_at).toBeNull();
    await tick('2026-06-05T12:00:01Z');
    expect(await jobKeys()).toEqual(['window@2026-06-03T12:00:00.000Z', 'window@2026-06-04T12:00:00.000Z']);
  });

  it('an interval schedule runs every N ms from its start, on the database clock', async () => {
    await s().createSchedule(
      t.db,
      { key: 'feed:42', job: digest, everyMs: 15 * 60_000, payload: { userId: 'feed' } },
      { now: at('2026-06-01T10:07:00Z') },
    );
    expect((await row('feed:42')).next_run_at).toEqual(at('2026-06-01T10:22:00Z'));
    await tick('2026-06-01T10:22:00.5Z');
    await tick('2026-06-01T10:37:01Z');
    expect(await jobKeys()).toEqual(['feed:42@2026-06-01T10:22:00.000Z', 'feed:42@2026-06-01T10:37:00.000Z']);
    expect((await row('feed:42')).next_run_at).toEqual(at('2026-06-01T10:52:00Z'));
    // With a start: runs at the start, then every interval.
    await s().createSchedule(
      t.db,
      { key: 'feed:43', job: digest, everyMs: 60_000, payload: { userId: 'f' }, startAt: at('2026-06-01T11:00:00Z') },
      { now: at('2026-06-01T10:07:00Z') },
    );
    expect((await row('feed:43')).next_run_at).toEqual(at('2026-06-01T11:00:00Z'));
  });

  it('after a long gap the missed policy decides: last (one), skip (none), N (the newest N)', async () => {
    const hourly = { cron: '0 * * * *', timezone: 'UTC' } as const;
    const now = { now: at('2026-06-01T00:30:00Z') };
    await s().createSchedule(t.db, spec('m-last', hourly), now);
    await s().createSchedule(t.db, spec('m-skip', { ...hourly, missed: 'skip' }), now);
    await s().createSchedule(t.db, spec('m-3', { ...hourly, missed: 3 }), now);
    const result = await tick('2026-06-01T10:30:00Z');
    expect(result.skipped.sort((a, b) => a.schedule.localeCompare(b.schedule))).toEqual([
      { schedule: 'm-3', count: 7 },
      { schedule: 'm-last', count: 9 },
      { schedule: 'm-skip', count: 10 },
    ]);
    expect(await jobKeys()).toEqual([
      'm-3@2026-06-01T08:00:00.000Z',
      'm-3@2026-06-01T09:00:00.000Z',
      'm-3@2026-06-01T10:00:00.000Z',
      'm-last@2026-06-01T10:00:00.000Z',
    ]);
    for (const key of ['m-last', 'm-skip', 'm-3']) {
      expect(await row(key)).toMatchObject({
        next_run_at: at('2026-06-01T11:00:00Z'),
        last_occurrence: at('2026-06-01T10:00:00Z'),
      });
    }
  });

  it('DST: daily 09:00 in New York and Lord Howe lands on the local time across each shift, once a day', async () => {
    const cases = [
      // New York: EST (UTC-5) until 2026-03-08 02:00, then EDT (UTC-4).
      ['America/New_York', '2026-03-06T20:00:00Z', ['2026-03-07T14:00', '2026-03-08T13:00', '2026-03-09T13:00']],
      // …and back on 2026-11-01.
      ['America/New_York', '2026-10-30T20:00:00Z', ['2026-10-31T13:00', '2026-11-01T14:00', '2026-11-02T14:00']],
      // Lord Howe: UTC+11 until 2026-04-05 02:00, then UTC+10:30 (a 30-minute shift).
      ['Australia/Lord_Howe', '2026-04-02T23:00:00Z', ['2026-04-03T22:00', '2026-04-04T22:30', '2026-04-05T22:30']],
      // …and forward again on 2026-10-04.
      ['Australia/Lord_Howe', '2026-10-01T23:00:00Z', ['2026-10-02T22:30', '2026-10-03T22:00', '2026-10-04T22:00']],
    ] as const;
    for (const [timezone, from, expected] of cases) {
      await t.admin.query(`truncate "${t.schema}".runtime_schedules, "${t.schema}".jobs`);
      await s().createSchedule(t.db, spec('daily', { cron: '0 9 * * *', timezone }), { now: at(from) });
      // A tick every hour for three days: every occurrence once, at its local 09:00.
      for (let h = 1; h <= 72; h++) await tick(new Date(at(from).getTime() + h * 3_600_000).toISOString());
      expect(await jobKeys()).toEqual(expected.map((d) => `daily@${d}:00.000Z`));
    }
  });

  it('DST: the same occurrences as a code schedule of the same cron (one rule, shared), hourly across the night of each shift', async () => {
    const cases = [
      ['America/New_York', '2026-03-08T04:00:00Z'],
      ['America/New_York', '2026-11-01T03:00:00Z'],
      ['Australia/Lord_Howe', '2026-04-04T13:00:00Z'],
      ['Australia/Lord_Howe', '2026-10-03T13:00:00Z'],
    ] as const;
    for (const [timezone, from] of cases) {
      await t.admin.query(`truncate "${t.schema}".runtime_schedules, "${t.schema}".jobs`);
      const cron = '*/30 * * * *';
      await s().createSchedule(t.db, spec('night', { cron, timezone, missed: 100 }), { now: at(from) });
      const end = new Date(at(from).getTime() + 6 * 3_600_000);
      await tick(end.toISOString());
      const code = defineSchedule({
        name: 'night',
        cron,
        timezone,
        job: digest,
        payload: { userId: 'x' },
        missed: 100,
      });
      const expected = dueOccurrences(code, at(from), end).enqueue.map((d) => `night@${d.toISOString()}`);
      expect(expected.length).toBeGreaterThan(9);
      expect(await jobKeys()).toEqual(expected.sort());
    }
  });

  it('a schedule of a kind no worker serves still enqueues its jobs', async () => {
    const orphan = defineJob({ kind: 'nobody-runs-me', payload: z.object({}), handler: () => {} });
    await s().createSchedule(
      t.db,
      { key: 'orphan', job: orphan, cron: '0 * * * *' },
      { now: at('2026-06-01T10:10:00Z') },
    );
    await tick('2026-06-01T11:00:01Z');
    const { rows } = await t.admin.query(`select kind, state from "${t.schema}".jobs`);
    expect(rows).toEqual([{ kind: 'nobody-runs-me', state: 'queued' }]);
  });
});

describe(`applySchedules (${testDriver()})`, () => {
  it('is idempotent: the same set again writes nothing; a smaller set deletes what it no longer lists', async () => {
    const set = [spec('a'), spec('b'), spec('c')];
    const first = await s().applySchedules(t.db, 'team-1', set, { now: at('2026-06-01T10:00:00Z') });
    expect(first).toEqual({ created: ['a', 'b', 'c'], updated: [], unchanged: [], deleted: [] });
    const before = await t.admin.query(
      `select key, version, updated_at, xmin::text from "${t.schema}".runtime_schedules order by key`,
    );
    const again = await s().applySchedules(t.db, 'team-1', set, { now: at('2026-06-01T11:00:00Z') });
    expect(again).toEqual({ created: [], updated: [], unchanged: ['a', 'b', 'c'], deleted: [] });
    const after = await t.admin.query(
      `select key, version, updated_at, xmin::text from "${t.schema}".runtime_schedules order by key`,
    );
    // Not even a new row version.
    expect(after.rows).toEqual(before.rows);
    const third = await s().applySchedules(t.db, 'team-1', [spec('a'), spec('b', { cron: '0 10 * * 1' })], {
      now: at('2026-06-01T12:00:00Z'),
    });
    expect(third).toEqual({ created: [], updated: ['b'], unchanged: ['a'], deleted: ['c'] });
    // Another set's schedules and ones with no set are not touched.
    await s().createSchedule(t.db, spec('solo'));
    await s().applySchedules(t.db, 'team-2', [spec('x')]);
    const last = await s().applySchedules(t.db, 'team-1', []);
    expect(last.deleted.sort()).toEqual(['a', 'b']);
    const left = await t.admin.query(`select key from "${t.schema}".runtime_schedules order by key`);
    expect(left.rows.map((r) => r.key)).toEqual(['solo', 'x']);
  });
});

describe(`bad input (${testDriver()})`, () => {
  it('is refused before anything is written, with a message naming the problem', async () => {
    await expect(s().createSchedule(t.db, spec('bad', { payload: { userId: 42 } as never }))).rejects.toThrow(
      PayloadValidationError,
    );
    await expect(s().createSchedule(t.db, spec('bad', { cron: 'every day' }))).rejects.toThrow(/invalid cron/);
    await expect(s().createSchedule(t.db, spec('bad', { timezone: 'Mars/Olympus' }))).rejects.toThrow(
      /unknown time zone "Mars\/Olympus"/,
    );
    await expect(s().createSchedule(t.db, spec('no spaces allowed'))).rejects.toThrow(/invalid schedule key/);
    await expect(s().createSchedule(t.db, spec('both', { everyMs: 60_000 }))).rejects.toThrow(
      /exactly one of cron and everyMs/,
    );
    await expect(
      s().createSchedule(t.db, { key: 'fast', job: digest, everyMs: 10, payload: { userId: 'x' } }),
    ).rejects.toThrow(InvalidOptionsError);
    await expect(s().applySchedules(t.db, 'dup', [spec('d'), spec('d')])).rejects.toThrow(/lists d twice/);
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".runtime_schedules`)).rows[0].n).toBe(0);
  });
});

describe(`listing and the idle wake-up (${testDriver()})`, () => {
  it("tells the nudger when a written schedule is next due (an idle platform's hint), never failing the write", async () => {
    const noted: { queue: string; at: Date | null }[] = [];
    const nudger = {
      nudge: async () => {},
      noteDue: async (due: readonly { queue: string; at: Date | null }[]) => {
        noted.push(...due);
        throw new Error('the hint store is down');
      },
    };
    const scheduler = createScheduler({ schema: t.schema, nudger });
    const created = await scheduler.createSchedule(t.db, spec('hinted'), { now: at('2026-06-01T10:00:00Z') });
    expect(created.outcome).toBe('created');
    // Unchanged: nothing written, nothing noted.
    await scheduler.upsertSchedule(t.db, spec('hinted'), { now: at('2026-06-01T10:00:00Z') });
    expect(noted).toEqual([{ queue: 'mail', at: at('2026-06-08T07:00:00Z') }]);
  });

  it('listSchedules shows run-time and code schedules in one list; nextDue reports the earliest next run', async () => {
    await s().createSchedule(t.db, spec('digest:user-9'), { now: at('2026-06-01T10:00:00Z') });
    await s().createSchedule(t.db, spec('digest:user-8', { cron: '0 12 * * *', timezone: 'UTC' }), {
      now: at('2026-06-01T10:00:00Z'),
    });
    await s().pauseSchedule(t.db, 'digest:user-8');
    const code = defineSchedule({ name: 'nightly', cron: '0 3 * * *', job: digest, payload: { userId: 'n' } });
    const listed = await listSchedules(t.db, { schema: t.schema, defined: [code], now: at('2026-06-01T10:00:00Z') });
    expect(listed.map((r) => [r.name, r.source, r.nextOccurrence?.toISOString() ?? null, r.pausedAt !== null])).toEqual(
      [
        ['digest:user-8', 'runtime', null, true],
        ['digest:user-9', 'runtime', '2026-06-08T07:00:00.000Z', false],
        ['nightly', 'code', '2026-06-02T03:00:00.000Z', false],
      ],
    );
    const due = await nextDue(t.db.executor, t.schema, { kinds: ['other'] });
    expect(due.scheduleAt).toEqual(at('2026-06-08T07:00:00Z'));
  });
});
