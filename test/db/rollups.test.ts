import { describe, expect, it } from 'vitest';
import { pruneRollups, rollUpActivity } from '../../db/statements/rollups.js';
import { activitySeries, queueStats } from '../../db/statements/stats.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('rollups', (ctx) => {
  t = ctx;
});

/** Finished jobs: `n` of `state` in `queue`, finished at `at`. */
async function finished(n: number, state: 'completed' | 'dead' | 'cancelled', queue: string, at: Date) {
  await t.admin.query(
    `insert into "${t.schema}".jobs (kind, queue, state, attempt, started_at, attempted_at, finished_at, dead_reason)
     select 'k', $2, $3, 1, $4, $4, $4, case when $3 = 'completed' then null else 'manual' end from generate_series(1, $1)`,
    [n, queue, state, at],
  );
}

const minute = 60_000;
// A fixed "now" on the database's side: 30 s into a minute, an hour of history before it.
const now = new Date(Math.floor(Date.now() / minute) * minute + 30_000);
const ago = (minutes: number) => new Date(now.getTime() - minutes * minute);
const series = (queue?: string) =>
  activitySeries(t.db.executor, t.schema, { bucketSeconds: 60, buckets: 60, now, ...(queue ? { queue } : {}) });

describe(`activity rollups (${testDriver()})`, () => {
  it('gives the charts the same counts from rolled-up minutes as from the rows, and counts rows finished since', async () => {
    await finished(5, 'completed', 'emails', ago(50));
    await finished(3, 'dead', 'emails', ago(50));
    await finished(7, 'completed', 'reports', ago(20));
    await finished(2, 'cancelled', 'reports', ago(20));
    await finished(4, 'completed', 'emails', ago(1));
    // Deleted completions (completedJobs: 'delete') count too.
    await t.admin.query(
      `insert into "${t.schema}".completed_counts (minute, queue, kind, completed) values ($1, 'emails', 'k', 6)`,
      [ago(30)],
    );
    const before = { all: await series(), emails: await series('emails') };
    expect(before.all.reduce((n, b) => n + b.completed, 0)).toBe(22);

    // Minutes closed more than two minutes ago are rolled up; the minute one ago stays in the table.
    expect(await rollUpActivity(t.db.executor, t.schema, { now })).toBe(3);
    const { rows } = await t.admin.query(
      `select queue, completed::int, dead::int, cancelled::int from "${t.schema}".activity_rollups order by minute, queue`,
    );
    expect(rows).toEqual([
      { queue: 'emails', completed: 5, dead: 3, cancelled: 0 },
      { queue: 'emails', completed: 6, dead: 0, cancelled: 0 },
      { queue: 'reports', completed: 7, dead: 0, cancelled: 2 },
    ]);
    // Once rolled up, the rows behind them no longer matter: a pruned row stays counted.
    await t.admin.query(`delete from "${t.schema}".jobs where finished_at < $1`, [ago(10)]);
    await t.admin.query(`delete from "${t.schema}".completed_counts`);
    expect(await series()).toEqual(before.all);
    expect(await series('emails')).toEqual(before.emails);

    // Nothing new closed: nothing written; a second caller writes nothing twice.
    expect(await rollUpActivity(t.db.executor, t.schema, { now })).toBe(0);
    await finished(2, 'dead', 'emails', ago(1));
    const later = new Date(now.getTime() + 5 * minute);
    expect(await rollUpActivity(t.db.executor, t.schema, { now: later })).toBe(1);
    const counted = await activitySeries(t.db.executor, t.schema, { bucketSeconds: 3600, buckets: 2, now: later });
    expect(counted.reduce((n, b) => n + b.completed + b.dead, 0)).toBe(27);
  });

  it('two callers at once roll each minute up once', async () => {
    await finished(10, 'completed', 'emails', ago(40));
    await finished(10, 'completed', 'emails', ago(39));
    const other = openDb();
    try {
      const written = await Promise.all([
        rollUpActivity(t.db.executor, t.schema, { now }),
        rollUpActivity(other.executor, t.schema, { now }),
      ]);
      expect(written[0] + written[1]).toBe(2);
      const { rows } = await t.admin.query(`select sum(completed)::int as n from "${t.schema}".activity_rollups`);
      expect(rows[0].n).toBe(20);
    } finally {
      await other.close();
    }
  });

  it('queue_stats counts the last hour from rollups and the rows since; its DLQ is every dead job', async () => {
    const real = new Date();
    const minutesAgo = (m: number) => new Date(real.getTime() - m * minute);
    await finished(3, 'completed', 'emails', minutesAgo(30));
    await finished(2, 'dead', 'emails', minutesAgo(90));
    await finished(1, 'dead', 'emails', minutesAgo(30));
    const read = async () => (await queueStats(t.db.executor, t.schema)).find((r) => r.queue === 'emails');
    const before = await read();
    expect(before).toMatchObject({ completedLastHour: 3, deadLastHour: 1, dead: 3 });
    await rollUpActivity(t.db.executor, t.schema);
    await finished(4, 'completed', 'emails', new Date());
    expect(await read()).toMatchObject({ completedLastHour: 7, deadLastHour: 1, dead: 3 });
  });

  it('prunes rollups older than their retention', async () => {
    await finished(1, 'completed', 'emails', ago(50));
    await finished(1, 'completed', 'emails', ago(10));
    await rollUpActivity(t.db.executor, t.schema, { now });
    expect(await pruneRollups(t.db.executor, t.schema, 30 * minute, now)).toBe(1);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".activity_rollups`);
    expect(rows[0].n).toBe(1);
  });
});
