import type pg from 'pg';
import { SLEEP_NAME, STEPPED_KIND, TRANSACTIONAL_STEPS, WAIT_NAME } from './steps-job.js';

export interface StepCheckResult {
  /** Stepped jobs enqueued, and those that ended completed / dead. */
  stepped: number;
  steppedCompleted: number;
  steppedDead: number;
  /** Executions of step functions recorded, and those beyond the first of their step (reruns in flight). */
  stepRuns: number;
  stepRunsRepeated: number;
  /**
   * Executions of a step's function that began when a completion of that step had already
   * committed for the job: a completed step must never run again (only the one in flight when its
   * holder died, lost its lease or timed out may).
   */
  stepReruns: number;
  /**
   * (job, transactional step) pairs with more than one row written, or, for a completed job, not
   * exactly one row, or a stored step result that is not that row's id: a transactional step's
   * writes and its completion commit together, once.
   */
  stepEffectErrors: number;
  /**
   * Signalled jobs whose signal was not sent exactly once, or that did not complete, or did not
   * return that signal's payload in every run that got past the wait, or whose key's signal was not
   * taken by the job: a signal sent is taken by its wait, before or after the wait began.
   */
  signalsLost: number;
  signalsEarly: number;
  signalsLate: number;
  /** Signalled jobs whose wait went back to the queue to wait (late signals should all). */
  waited: number;
  /** Stepped jobs that went to sleep (each does, once, after its first step). */
  slept: number;
}

/** The checks of the stepped and signalled jobs, from the recorded history. */
export async function checkSteps(pool: pg.Pool, schema: string): Promise<StepCheckResult> {
  const s = `"${schema}"`;
  const one = async (text: string) => Number((await pool.query(text)).rows[0]?.n ?? 0);
  // Completed: the row says so, or the audit saw its holder delete it on completion.
  const completed = `coalesce(j.state = 'completed' or (j.id is null and e.job_id in (
    select a.job_id from ${s}.chaos_audit a where a.new_state = 'deleted' and a.old_state = 'running')), false)`;
  const stepped = await one(`select count(*) as n from ${s}.chaos_enqueued where stepped`);
  const steppedCompleted = await one(`
    select count(*) as n from ${s}.chaos_enqueued e left join ${s}.jobs j on j.id = e.job_id
    where e.stepped and ${completed}`);
  const steppedDead = await one(
    `select count(*) as n from ${s}.jobs where kind = '${STEPPED_KIND}' and state = 'dead'`,
  );
  const stepRuns = await one(`select count(*) as n from ${s}.chaos_step_runs`);
  const stepRunsRepeated = await one(`
    select coalesce(sum(c - 1), 0) as n from (select count(*) as c from ${s}.chaos_step_runs group by job_id, step) x`);
  // Exact, with no clock involved: the completion's transaction is visible in the snapshot of
  // the statement that recorded the execution, its function's first act (so it had committed).
  const stepReruns = await one(`
    select count(*) as n from ${s}.chaos_step_runs x
    where exists (
      select 1 from ${s}.chaos_step_history h
      where h.job_id = x.job_id and h.name = x.step and h.new_state = 'completed'
        and pg_visible_in_snapshot(h.xid, x.snap))`);
  // The run's transactional steps (none on neon-http); a table-less schema ran with the default ones.
  const configured = await pool
    .query(`select transactional_steps from ${s}.chaos_run limit 1`)
    .then((r) => r.rows[0]?.transactional_steps as string[] | undefined)
    .catch(() => undefined);
  const txSteps = (configured ?? TRANSACTIONAL_STEPS).map((t) => `('${t}')`).join(', ') || `('')`;
  const stepEffectErrors = await one(`
    with rows_of as (
      select job_id, step, count(*) as c, min(id) as id from ${s}.chaos_step_effects group by job_id, step),
    wrong as (
      select job_id, step from rows_of where c > 1
      union
      select e.job_id, t.step from ${s}.chaos_enqueued e left join ${s}.jobs j on j.id = e.job_id
      cross join (values ${txSteps}) as t(step)
      left join rows_of r on r.job_id = e.job_id and r.step = t.step
      left join ${s}.job_steps js on js.job_id = e.job_id and js.name = t.step
      where e.stepped and ${completed} and t.step <> ''
        and (coalesce(r.c, 0) <> 1 or js.state is distinct from 'completed' or (js.result #>> '{}') is distinct from r.id::text))
    select count(*) as n from wrong`);
  const signalsLost = await one(`
    select count(*) as n from ${s}.chaos_enqueued e
    left join ${s}.jobs j on j.id = e.job_id
    left join ${s}.chaos_signals c on c.job_id = e.job_id
    where e.signal_key is not null and (
      c.job_id is null
      or not ${completed}
      or (select count(*) from ${s}.signals g where g.key = e.signal_key) <> 1
      or not exists (select 1 from ${s}.signals g where g.key = e.signal_key and g.taken_by = e.job_id)
      or not exists (select 1 from ${s}.chaos_signal_results r where r.job_id = e.job_id)
      or exists (select 1 from ${s}.chaos_signal_results r where r.job_id = e.job_id and r.payload is distinct from c.payload)
      or (j.id is not null and j.result->'signal' is distinct from c.payload))`);
  const signalsEarly = await one(`select count(*) as n from ${s}.chaos_signals where early`);
  const signalsLate = await one(`select count(*) as n from ${s}.chaos_signals where not early`);
  const waited = await one(`
    select count(distinct job_id) as n from ${s}.chaos_step_history where name = '${WAIT_NAME}' and new_state = 'waiting'`);
  const slept = await one(`
    select count(distinct job_id) as n from ${s}.chaos_step_history where name = '${SLEEP_NAME}'`);
  return {
    slept,
    stepped,
    steppedCompleted,
    steppedDead,
    stepRuns,
    stepRunsRepeated,
    stepReruns,
    stepEffectErrors,
    signalsLost,
    signalsEarly,
    signalsLate,
    waited,
  };
}
