import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkBatches } from '../../chaos/batch-job.js';
import { checkRun } from '../../chaos/checker.js';
import type { ChaosReport } from '../../chaos/harness.js';
import { CLEAN_LINE, ciRun, expectEventsFannedOut, expectNothingLost } from '../helpers/chaos.js';

// A CI-sized chaos run on node-postgres: worker processes killed at random points, connections
// dropped and left half-open, answers lost after COMMIT, handlers that throw, hang and kill their own
// process, duplicate ticks. (chaos-neon-ws.test.ts and chaos-neon-http.test.ts run Neon's drivers.)
let report: ChaosReport;
let admin: pg.Pool;

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  report = await ciRun({ jobs: 1_500, targetKills: 12 });
}, 600_000);
afterAll(async () => {
  await admin.query(`drop schema if exists "${report?.schema}" cascade`);
  await admin.end();
});

describe('chaos (CI size)', () => {
  it('loses no job and lets no write land under a stale lease token', () => {
    expect(report.line).toMatch(CLEAN_LINE('pg', report.result.enqueued));
    // The live enqueues (a tenth more, through the faulty proxy) came in on top of the 1,500.
    expect(report.result.liveEnqueued).toBeGreaterThanOrEqual(150);
    expectNothingLost(report.result, 1500 + report.result.liveEnqueued);
    // Every worker ticked an every-second schedule at each invocation start, through the faults.
    expect(report.result.scheduled).toBeGreaterThanOrEqual(5);
    expect(report.result.duplicateTokenExecutions).toBe(0);
    expect(report.failed).toBe(false);
  });

  it('fanned every publish out to every subscriber exactly once, through the kills', () => {
    expectEventsFannedOut(report);
    expect(report.detail).toMatch(/^chaos-events: \d+ published, \d+ subscriber jobs, 0 missing, 0 duplicated/m);
  });

  it('ran jobs that waited for others: each after its parents, through the kills', async () => {
    const { rows } = await admin.query(
      `select count(*) filter (where j.state = 'completed')::int as completed, count(*)::int as n
       from "${report.schema}".chaos_enqueued e join "${report.schema}".jobs j on j.id = e.job_id
       where e.parents is not null`,
    );
    expect(rows[0].n).toBeGreaterThanOrEqual(150);
    expect(rows[0].completed).toBeGreaterThan(100);
    expect(report.result.dependencyViolations).toBe(0);
  });

  it('ran stepped jobs through the kills: each step once (but the one in flight), each signal taken, early and late', async () => {
    const r = report.result;
    expect(r.stepped).toBe(94); // n % 16 = 3 among 1,500
    // Every step function ran at least once per job; some again, in flight (a throw, a death).
    expect(r.stepRuns).toBeGreaterThanOrEqual(5 * r.stepped);
    expect(r.stepRunsRepeated).toBeGreaterThan(0);
    const { rows } = await admin.query(
      `select (select count(*)::int from "${report.schema}".chaos_step_effects) as effects,
         (select count(*)::int from "${report.schema}".chaos_enqueued where signal_key is not null) as signalled`,
    );
    expect(rows[0].effects).toBe(2 * r.stepped);
    // Half the signals sent before any worker ran, the rest once their jobs were seen waiting.
    expect(r.signalsEarly + r.signalsLate).toBe(rows[0].signalled);
    expect(r.signalsEarly).toBeGreaterThan(0);
    expect(r.signalsLate).toBeGreaterThan(0);
    expect(r.waited).toBeGreaterThan(0);
  });

  it('really injected faults: processes died and jobs ran again; the paused queue was paused and resumed', async () => {
    expect(report.kills).toBeGreaterThanOrEqual(5);
    const pauses = await admin.query(
      `select count(*)::int as n, count(resume_sent_at)::int as resumed from "${report.schema}".chaos_pauses`,
    );
    expect(pauses.rows[0].n).toBeGreaterThanOrEqual(2);
    expect(pauses.rows[0].resumed).toBe(pauses.rows[0].n);
    expect(report.result.reExecuted).toBeGreaterThan(0);
    // Poison jobs (always throw) end dead with exactly max attempts.
    expect(report.result.dead).toBeGreaterThan(0);
  });

  it('ran batch handlers through the kills: each job got the outcome its batch answered, once', async () => {
    const b = report.batches;
    expect(b.jobs).toBe(94); // n % 16 = 11 among 1,500
    expect(b.batches).toBeGreaterThan(0);
    expect(b).toMatchObject({ mismatches: 0, foreign: 0, completedTwice: 0, handedTwice: 0 });
    expect(report.batchLine).toMatch(/^batches: \d+ batches, 94 jobs, outcomes kept per job /);
    // Some batches held more than one job, and some jobs were handed to more than one call.
    const { rows } = await admin.query(
      `select max(size)::int as most, (select count(*)::int from (select job_id from "${report.schema}".chaos_batch_runs
         group by job_id having count(*) > 1) x) as again from "${report.schema}".chaos_batch_runs`,
    );
    expect(rows[0].most).toBeGreaterThan(1);
    expect(rows[0].again).toBeGreaterThan(0);
    // The batch checker catches an outcome written to the wrong job, and a state no answer led to.
    const s = `"${report.schema}"`;
    await admin.query(
      `update ${s}.jobs set result = jsonb_set(result, '{n}', '-1') where id = (
         select min(id) from ${s}.jobs where kind = 'chaos-batched' and state = 'completed');
       update ${s}.jobs set state = 'cancelled' where id = (
         select max(id) from ${s}.jobs where kind = 'chaos-batched' and state = 'completed')`,
    );
    const tampered = await checkBatches(admin, report.schema);
    expect(tampered.foreign).toBe(1);
    expect(tampered.mismatches).toBe(1);
  });

  it('the checker catches what it is there to catch', async () => {
    const s = `"${report.schema}"`;
    // A write under a token that is not the row's current one (what fencing prevents).
    await admin.query(
      `update ${s}.jobs set lease_token = gen_random_uuid(), updated_at = now() where id = (select min(id) from ${s}.jobs where state = 'completed')`,
    );
    // A committed enqueue whose job disappeared, and a job that never finished.
    await admin.query(
      `delete from ${s}.jobs where id = (select max(id) from ${s}.jobs where state = 'completed' and kind = 'chaos')`,
    );
    // An occurrence of the schedule that became a second job.
    await admin.query(
      `insert into ${s}.chaos_schedule_runs (occurrence, job_id) select occurrence, job_id + 1000000000 from ${s}.chaos_schedule_runs limit 1`,
    );
    await admin.query(`insert into ${s}.chaos_enqueued (job_id, queue) values (999999999, 'chaos')`);
    // A claim of a paused-queue job by a statement that began while the queue was paused.
    await admin.query(
      `insert into ${s}.chaos_pauses (confirmed_at, resume_sent_at) values ('2000-01-01', '2000-01-02');
       insert into ${s}.chaos_audit (job_id, old_state, new_state, old_attempt, new_attempt, stmt_at)
       select job_id, 'queued', 'running', 0, 1, '2000-01-01 12:00' from ${s}.chaos_enqueued where queue = 'chaos-paused' limit 1`,
    );
    // An execution under a lease that never ended.
    await admin.query(
      `insert into ${s}.chaos_executions (job_id, lease_token, attempt, pid) values (1, gen_random_uuid(), 1, 1)`,
    );
    // Two jobs of one ordering key, the later one claimed first.
    await admin.query(
      `insert into ${s}.chaos_enqueued (job_id, queue, ordering_key) values (999999990, 'chaos', 'tamper'), (999999991, 'chaos', 'tamper');
       insert into ${s}.chaos_audit (job_id, old_state, new_state, old_attempt, new_attempt, at)
       values (999999991, 'queued', 'running', 0, 1, '2000-01-01'), (999999990, 'queued', 'running', 0, 1, '2000-01-02')`,
    );
    // A job with a parent, claimed though its parent never completed.
    await admin.query(
      `insert into ${s}.chaos_enqueued (job_id, queue, parents, run_anyway) values (999999992, 'chaos', '{999999993}', false);
       insert into ${s}.chaos_audit (job_id, old_state, new_state, old_attempt, new_attempt, at)
       values (999999992, 'queued', 'running', 0, 1, '2000-01-01')`,
    );
    // A step function run again after its step's completion committed; a transactional step's row
    // written twice; a run of a signalled job that returned another payload than its signal's.
    await admin.query(
      `insert into ${s}.chaos_step_runs (job_id, step, lease_token, pid)
       select job_id, name, gen_random_uuid(), 1 from ${s}.job_steps where name = 'fetch' and state = 'completed' limit 1;
       insert into ${s}.chaos_step_effects (job_id, step, lease_token, pid)
       select job_id, step, lease_token, pid from ${s}.chaos_step_effects limit 1;
       insert into ${s}.chaos_signal_results (job_id, lease_token, payload)
       select job_id, gen_random_uuid(), '{"key":"another"}' from ${s}.chaos_signals limit 1`,
    );
    const tampered = await checkRun(admin, report.schema);
    expect(tampered.stepReruns).toBe(1);
    expect(tampered.stepEffectErrors).toBe(1);
    expect(tampered.signalsLost).toBe(1);
    expect(tampered.dependencyViolations).toBe(1);
    expect(tampered.staleWrites).toBe(1);
    expect(tampered.lost).toBe(5); // the tampering rows of the key and the child are lost too
    expect(tampered.orderViolations).toBe(1);
    expect(tampered.unexplainedExecutions).toBeGreaterThanOrEqual(1);
    expect(tampered.pauseViolations).toBe(1);
    expect(tampered.scheduleDuplicates).toBe(1);
  });
});

describe('chaos (CI size), workers deleting completed jobs', () => {
  let deleting: ChaosReport;
  beforeAll(async () => {
    deleting = await ciRun({ jobs: 1_000, targetKills: 8, completedJobs: 'delete' });
  }, 600_000);
  afterAll(async () => {
    await admin.query(`drop schema if exists "${deleting?.schema}" cascade`);
  });

  it('loses no job: every missing row was deleted by its holder completing it', async () => {
    expectNothingLost(deleting.result, 1000 + deleting.result.liveEnqueued);
    const s = `"${deleting.schema}"`;
    const { rows } = await admin.query(
      `select (select count(*)::int from ${s}.jobs where state = 'completed') as kept,
         (select count(*)::int from ${s}.jobs where state = 'completed'
           and (dependents is not null or dedupe_mode = 'window')) as parents,
         (select coalesce(sum(completed), 0)::int from ${s}.completed_counts where kind in ('chaos', 'chaos-stepped')) as counted`,
    );
    // The rows really went — but those of parents, kept for their children's ctx.parents(), and
    // those holding a dedupe window (the live enqueues' keys) — and the stats counted every one of them.
    expect(rows[0].kept).toBe(rows[0].parents);
    expect(rows[0].counted + rows[0].kept).toBe(deleting.result.completed);
    expect(deleting.result.dependencyViolations).toBe(0);
  });
});

describe('chaos (CI size), a cap on invocations with fan-out and nudges, each start dropped or duplicated at random', () => {
  let capped: ChaosReport;
  beforeAll(async () => {
    // Fewer stepped jobs (1 in 64): their self-kills hold the capped slots up, and CI time is short.
    capped = await ciRun({ jobs: 1_500, targetKills: 8, maxInvocations: 4, steppedEvery: 64 });
  }, 600_000);
  afterAll(async () => {
    await admin.query(`drop schema if exists "${capped?.schema}" cascade`);
  });

  it('loses no job and lets no write land under a stale token; started invocations did run', async () => {
    expectNothingLost(capped.result, 1500 + capped.result.liveEnqueued);
    expect(capped.result.duplicateTokenExecutions).toBe(0);
    const s = `"${capped.schema}"`;
    // Invocations started out of band (fan-out, nudges) are named <pid>-s<n>: some took a slot.
    const { rows } = await admin.query(
      `select count(distinct invocation_id)::int as started from ${s}.chaos_registrations where invocation_id like '%-s%'`,
    );
    expect(rows[0].started).toBeGreaterThan(0);
  });
});
