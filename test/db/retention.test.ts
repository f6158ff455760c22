import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMaintenance } from '../../core/maintenance.js';
import { setupTestSchema, type TestContext, testDriver } from '../helpers/db.js';
import { captureStatements } from '../helpers/statements.js';

let t: TestContext;
beforeAll(async () => {
  t = await setupTestSchema('retention');
});
afterAll(() => t.close());

const HOUR = 3_600_000;

describe(`retention pruning (${testDriver()})`, () => {
  it('deletes only finished jobs past their retention, in bounded batches; live and younger dead jobs stay', async () => {
    const s = `"${t.schema}"`;
    // Fixtures: 7 old completed, 2 young completed, 3 old cancelled, 2 dead at 2 days (kept:
    // the DLQ keeps 30 days), 1 dead at 40 days (pruned), plus queued and running jobs.
    await t.admin.query(`
      insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'completed', now() - interval '3 hours' from generate_series(1, 7);
      insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'completed', now() - interval '10 minutes' from generate_series(1, 2);
      insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'cancelled', now() - interval '5 hours' from generate_series(1, 3);
      insert into ${s}.jobs (kind, payload, state, finished_at, dead_reason) select 'k', '{}', 'dead', now() - interval '2 days', 'max_attempts' from generate_series(1, 2);
      insert into ${s}.jobs (kind, payload, state, finished_at, dead_reason) values ('k', '{}', 'dead', now() - interval '40 days', 'http_4xx');
      insert into ${s}.jobs (kind, payload, created_at) values ('k', '{}', now() - interval '90 days');
      insert into ${s}.jobs (kind, payload, state, lease_token, lease_expires_at, started_at)
        values ('k', '{}', 'running', gen_random_uuid(), now() + interval '1 minute', now() - interval '90 days');`);
    const { result, texts } = await captureStatements(testDriver(), () =>
      runMaintenance(t.db, {
        schema: t.schema,
        completedRetentionMs: HOUR,
        deadRetentionMs: 30 * 24 * HOUR,
        pruneBatchSize: 3,
      }),
    );
    expect(result).toMatchObject({ prunedCompleted: 7, prunedCancelled: 3, prunedDead: 1, pruneFinished: true });
    // 7 completed in batches of 3 → 3 deletes; cancelled 3 → 2 (the second finds none); dead → 1;
    // plus one for the per-minute completion counts, one for the rollups past their retention, one for
    // the durable steps of deleted jobs, one for old signals and one for events past their retention.
    expect(texts.filter((q) => /delete from/i.test(q))).toHaveLength(11);
    expect(texts.filter((q) => /delete from .*events/is.test(q))).toHaveLength(1);
    expect(texts.filter((q) => /delete from .*completed_counts/is.test(q))).toHaveLength(1);
    expect(texts.filter((q) => /delete from .*activity_rollups/is.test(q))).toHaveLength(1);
    // The rollup ran before the pruning: the pruned jobs stay counted, per minute.
    const rolled = await t.admin.query(
      `select state_totals.* from (select sum(completed)::int as completed, sum(dead)::int as dead,
        sum(cancelled)::int as cancelled from ${s}.activity_rollups) state_totals`,
    );
    expect(rolled.rows).toEqual([{ completed: 9, dead: 2, cancelled: 3 }]);
    const { rows } = await t.admin.query(
      `select state, count(*)::int as n from ${s}.jobs group by state order by state`,
    );
    expect(rows).toEqual([
      { state: 'completed', n: 2 },
      { state: 'dead', n: 2 },
      { state: 'queued', n: 1 },
      { state: 'running', n: 1 },
    ]);
  });

  it('stops within its time budget and says so', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(
      `insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'completed', now() - interval '3 hours' from generate_series(1, 50)`,
    );
    let now = 0;
    const clock = { now: () => (now += 1000), setTimer: () => () => {} };
    const report = await runMaintenance(t.db, {
      schema: t.schema,
      completedRetentionMs: HOUR,
      pruneBatchSize: 5,
      maxDurationMs: 4_000,
      clock,
    });
    expect(report.pruneFinished).toBe(false);
    expect(report.prunedCompleted).toBeLessThan(50);
    expect(report.prunedCompleted % 5).toBe(0);
  });

  it('is quiet only when it changed nothing and no job is ready or running', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(`truncate ${s}.jobs, ${s}.completed_counts, ${s}.activity_rollups`);
    const tick = () => runMaintenance(t.db, { schema: t.schema, completedRetentionMs: HOUR });
    expect((await tick()).quiet).toBe(true);
    // A job kept for later (a delayed one) leaves it quiet: the worker's wake-up covers it.
    await t.admin.query(`insert into ${s}.jobs (kind, payload, run_at) values ('k', '{}', now() + interval '1 hour')`);
    expect((await tick()).quiet).toBe(true);
    // A ready job: not quiet.
    await t.admin.query(`insert into ${s}.jobs (kind, payload) values ('k', '{}')`);
    expect((await tick()).quiet).toBe(false);
    // An old finished job to prune: the tick that prunes it is not quiet, the next one is.
    await t.admin.query(`delete from ${s}.jobs where run_at <= now()`);
    await t.admin.query(
      `insert into ${s}.jobs (kind, payload, state, finished_at) values ('k', '{}', 'completed', now() - interval '3 hours')`,
    );
    const pruning = await tick();
    expect(pruning).toMatchObject({ quiet: false, prunedCompleted: 1 });
    expect((await tick()).quiet).toBe(true);
  });
});
