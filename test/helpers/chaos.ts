import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type ChaosOptions, type ChaosReport, QUICK, runChaos } from '../../chaos/harness.js';
import type { Driver } from '../../db/connect.js';

/** A CI-sized run: 3 worker processes, an outside kill every ~300 ms, the schema kept for the checks. */
export const ciRun = (extra: Partial<ChaosOptions>) =>
  runChaos({
    ...QUICK,
    processes: 3,
    killIntervalMs: 300,
    databaseUrl: inject('databaseUrl'),
    keepSchema: true,
    // A short run meets each statement fault only if they come more often.
    statementFaultScale: 4,
    ...extra,
  }).then((report) => {
    // The run's figures in the CI log.
    console.log(`${report.detail}\n${report.batchLine}\n${report.line}`);
    return report;
  });

/** The summary line of a run in which every check held. */
export const CLEAN_LINE = (driver: string, jobs: number) =>
  new RegExp(
    `^chaos: driver=${driver} jobs=${jobs} processes=3 kills=\\d+ conn_faults=\\d+ answers_lost=\\d+ refused=\\d+ lost=0 unexpected=0 stale_writes=0 dead=\\d+ max_executions=\\d+ order_violations=0 limit_violations=0 pause_violations=0 schedule_duplicates=0 dependency_violations=0 step_reruns=0 signals_lost=0 enqueue_duplicates=0 replay_duplicates=0 runtime_occurrences=\\d+ runtime_duplicates=0 runtime_missing=0$`,
  );

/** Every publish made one event and one job per subscriber it matches: none missing, none twice. */
export function expectEventsFannedOut(report: ChaosReport): void {
  expect(report.events.published).toBeGreaterThan(0);
  expect(report.events).toMatchObject({ events: report.events.published, missing: 0, duplicated: 0 });
  // Two subscribers take every event, one only the even ones.
  expect(report.events.subscriberJobs).toBe(2 * report.events.published + Math.ceil(report.events.published / 2));
}

/** Every job ended completed or dead, none was lost, no write landed under a stale token. */
export function expectNothingLost(result: ChaosReport['result'], enqueued: number): void {
  expect(result).toMatchObject({
    enqueued,
    lost: 0,
    unexpected: 0,
    staleWrites: 0,
    unexplainedExecutions: 0,
    attemptAccountingErrors: 0,
    // Stepped jobs: no completed step ran again, each transactional step's row written once, every
    // signal taken by its job's wait and returned.
    stepReruns: 0,
    stepEffectErrors: 0,
    signalsLost: 0,
    // Keyed enqueues sent again after a lost answer made no second job; replays sent again replayed once.
    enqueueDuplicates: 0,
    replayDuplicates: 0,
  });
  expect(result.steppedCompleted).toBe(result.stepped);
  // Each stepped job slept once after its first step, through the same faults.
  expect(result.slept).toBe(result.stepped);
  // Cancelled: jobs whose parent died.
  expect(result.completed + result.dead + result.cancelled).toBe(enqueued);
}

/**
 * A CI-sized run of 1,000 jobs on `driver` (a file of its own per driver, so the runs go side by
 * side): nothing lost and no rule broken, every kind of fault met, every enqueue path taken (`paths`,
 * sorted), dead jobs replayed, stepped jobs completed, signals taken.
 */
export function describeDriverRun(driver: Driver, paths: readonly string[]): void {
  let report: ChaosReport;
  let admin: pg.Pool;

  beforeAll(async () => {
    admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
    report = await ciRun({ driver, jobs: 1_000, targetKills: 8 });
  }, 600_000);
  afterAll(async () => {
    await admin.query(`drop schema if exists "${report?.schema}" cascade`);
    await admin.end();
  });

  describe(`chaos (CI size) on ${driver}`, () => {
    it('loses no job, lets no write land under a stale token, reruns no step, loses or doubles no signal', () => {
      expect(report.line).toMatch(CLEAN_LINE(driver, report.result.enqueued));
      expectNothingLost(report.result, 1000 + report.result.liveEnqueued);
      expect(report.result.duplicateTokenExecutions).toBe(0);
      // The batch kind: each job's final state is the one its batch answered, written once.
      expect(report.batchLine).toMatch(/ outcomes kept per job /);
      expect(report.batches.jobs).toBeGreaterThan(0);
      // The run-time schedules: every occurrence one job, through the same faults; each schedule
      // fired at least once (a loaded machine may end a short run before any fires twice).
      expect(report.runtimeSchedules).toMatchObject({ duplicated: 0, missing: 0 });
      expect(report.runtimeSchedules.occurrences).toBeGreaterThanOrEqual(report.runtimeSchedules.schedules);
      expect(report.failed).toBe(false);
    });

    it('fanned every publish out to every subscriber exactly once, through the faults', () => {
      expectEventsFannedOut(report);
    });

    it('really went through the faults: answers lost, statements refused, processes killed', () => {
      expect(report.line).toMatch(/ answers_lost=[1-9]/);
      expect(report.line).toMatch(/ refused=[1-9]/);
      expect(report.kills).toBeGreaterThanOrEqual(4);
      expect(report.result.reExecuted).toBeGreaterThan(0);
    });

    it('enqueued by every path and replayed dead jobs through the faulty stand-in', async () => {
      const { rows } = await admin.query(
        `select distinct path from "${report.schema}".chaos_live_enqueues order by path`,
      );
      expect(rows.map((r) => r.path)).toEqual(paths);
      expect(report.result.liveEnqueued).toBeGreaterThanOrEqual(100);
      expect(report.result.replayed).toBeGreaterThan(0);
      expect(report.result.stepped).toBeGreaterThan(0);
      expect(report.result.steppedCompleted).toBe(report.result.stepped);
      expect(report.result.signalsEarly + report.result.signalsLate).toBeGreaterThan(0);
    });
  });
}
