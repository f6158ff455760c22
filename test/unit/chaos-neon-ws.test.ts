import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { ChaosReport } from '../../chaos/harness.js';
import { CLEAN_LINE, ciRun, expectNothingLost } from '../helpers/chaos.js';

// The CI-sized chaos run on Neon's WebSocket Pool, through the WebSocket proxy of skiplock/testing with
// its faults on: sockets closed mid-transaction and left half-open, frames delayed, answers lost after
// COMMIT or slowed by seconds — beside the kills, the throwing and hanging handlers and the
// duplicate ticks of every run.
let report: ChaosReport;
let admin: pg.Pool;

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  report = await ciRun({ driver: 'neon-ws', jobs: 1_000, targetKills: 8 });
}, 600_000);
afterAll(async () => {
  await admin.query(`drop schema if exists "${report?.schema}" cascade`);
  await admin.end();
});

describe('chaos (CI size) on neon-ws', () => {
  it('loses no job, lets no write land under a stale token, reruns no step, loses or doubles no signal', () => {
    expect(report.line).toMatch(CLEAN_LINE('neon-ws', report.result.enqueued));
    expectNothingLost(report.result, 1000 + report.result.liveEnqueued);
    expect(report.result.duplicateTokenExecutions).toBe(0);
    expect(report.failed).toBe(false);
  });

  it('really went through the faults: answers lost, statements refused, processes killed', () => {
    expect(report.line).toMatch(/ answers_lost=[1-9]/);
    expect(report.line).toMatch(/ refused=[1-9]/);
    expect(report.kills).toBeGreaterThanOrEqual(4);
    expect(report.result.reExecuted).toBeGreaterThan(0);
  });

  it('enqueued by every path and replayed dead jobs through the faulty proxy', async () => {
    const { rows } = await admin.query(
      `select distinct path from "${report.schema}".chaos_live_enqueues order by path`,
    );
    expect(rows.map((r) => r.path)).toEqual(['flow', 'keyed-many', 'keyed-one', 'transaction']);
    expect(report.result.liveEnqueued).toBeGreaterThanOrEqual(100);
    expect(report.result.replayed).toBeGreaterThan(0);
    // Every stepped job completed, each signal taken once by its job.
    expect(report.result.stepped).toBeGreaterThan(0);
    expect(report.result.steppedCompleted).toBe(report.result.stepped);
    expect(report.result.signalsEarly + report.result.signalsLate).toBeGreaterThan(0);
  });
});
