/**
 * The `schedule_tick` phase: run-time schedules at scale. 1,000,000 schedules, of which 1,000 are
 * due, ticked as a worker invocation ticks them (runRuntimeSchedules: a claim through the partial
 * index on next_run_at, then one statement that moves them and inserts their jobs): ms per tick,
 * statements per tick, occurrences per second; the same with nothing due, and the probe the
 * invocation's sweep carries (the cost an app with nothing due pays per invocation); 4 ticks at
 * once on the same 1,000 (no duplicates). Beside it, pg-boss's schedule pass every 30 s on one
 * leader with as many schedules, as many of them due (bench/schedule-tick-pgboss.ts).
 */
import { silentLogger } from '../core/logger.js';
import { runRuntimeSchedules } from '../core/runtime-schedules.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { sweepDoomed } from '../db/statements/bury.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, withClient } from './db.js';
import { type PgBossPassFigures, pgBossSchedulePass } from './schedule-tick-pgboss.js';

export interface ScheduleTickParams {
  schedules: number;
  due: number;
  reps: number;
}
export const SCHEDULE_TICK_FULL: ScheduleTickParams = { schedules: 1_000_000, due: 1_000, reps: 5 };
export const SCHEDULE_TICK_QUICK: ScheduleTickParams = { schedules: 100_000, due: 1_000, reps: 3 };

export interface ScheduleTickResult {
  schedules: number;
  due: number;
  /** A tick that enqueues `due` occurrences: median ms, statements, occurrences per second. */
  tick_ms: number;
  tick_statements: number;
  occurrences_per_s: number;
  /** A tick with nothing due (runRuntimeSchedules alone: its one claim). */
  idle_tick_ms: number;
  idle_tick_statements: number;
  /** The invocation's first statement (its sweep), without and with the probe for a due schedule it carries. */
  idle_sweep_ms: number;
  idle_sweep_with_probe_ms: number;
  /** 4 concurrent ticks on the same `due` schedules: wall ms, jobs written (must equal `due`). */
  concurrent_ticks_ms: number;
  concurrent_jobs: number;
  /**
   * pg-boss 12's schedule pass over the same schedules, `due` of them due, every 30 s on one leader
   * (bench/schedule-tick-pgboss.ts); its own pass and forwarding only in runs after they were measured.
   */
  pgboss?: PgBossPassFigures;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const round = (n: number) => Math.round(n * 10) / 10;

export async function runScheduleTick(
  server: string,
  params: ScheduleTickParams,
  log: (line: string) => void,
): Promise<ScheduleTickResult> {
  const url = await freshDatabase(server, 'skiplock_bench_schedules');
  const db = connect({ connectionString: url, max: 8 });
  try {
    await migrate(db, {});
    const t0 = Date.parse('2030-01-01T00:00:00Z');
    // Every schedule runs hourly from its own anchor; the first `due` are due at t0, the others
    // spread over the next hour. Written by SQL: 1,000,000 createSchedule calls would measure the
    // writes, not the tick.
    log(`  writing ${params.schedules} run-time schedules (${params.due} due)`);
    await withClient(url, async (c) => {
      await c.query(
        `insert into skiplock.runtime_schedules (key, kind, interval_ms, payload, queue, job_options, next_run_at, created_at, updated_at)
         select 'user-' || i, 'digest', 3600000, jsonb_build_object('user', i), 'default',
           '{"priority":0,"max_attempts":3,"deadline_ms":null,"correlation_id":null,"ordering_key":null,"ordering_hold":false,"concurrency_key":null,"destination":null}',
           a + interval '1 hour', a, a
         from generate_series(1, $1::int) i,
           lateral (select to_timestamp($2::float8 / 1000) - interval '1 hour'
             + case when i <= $3 then interval '0' else (1 + (i % 3599)) * interval '1 second' end as a) x`,
        [params.schedules, t0, params.due],
      );
    });
    await vacuumAnalyze(url);
    const reset = () =>
      withClient(url, async (c) => {
        await c.query('truncate skiplock.jobs');
        await c.query(
          `update skiplock.runtime_schedules set next_run_at = created_at + interval '1 hour', last_occurrence = null,
             claimed_until = null where key in (select 'user-' || i from generate_series(1, $1::int) i)`,
          [params.due],
        );
        await c.query('vacuum analyze skiplock.runtime_schedules');
      });
    const tick = (now: Date, target = db) => runRuntimeSchedules(target, { now, logger: silentLogger, limit: 1000 });

    // Nothing due: a tick just before t0.
    const idle: number[] = [];
    let idleStatements = 0;
    for (let rep = 0; rep < params.reps * 4; rep++) {
      const started = performance.now();
      const result = await tick(new Date(t0 - 10_000));
      idle.push(performance.now() - started);
      idleStatements = result.statements;
      if (result.claimed !== 0) throw new Error('an idle tick claimed schedules');
    }
    // The invocation's sweep, with and without the probe it carries for run-time schedules.
    const sweep = async (probeSchedules: boolean) => {
      const times: number[] = [];
      for (let rep = 0; rep < params.reps * 4; rep++) {
        const started = performance.now();
        await sweepDoomed(db.executor, 'skiplock', {
          kinds: ['digest'],
          limit: 1000,
          now: new Date(t0 - 10_000),
          probeSchedules,
        });
        times.push(performance.now() - started);
      }
      return median(times);
    };
    const sweepMs = await sweep(false);
    const probedSweepMs = await sweep(true);

    // `due` schedules due: one tick enqueues them all.
    const ticks: number[] = [];
    let statements = 0;
    for (let rep = 0; rep < params.reps; rep++) {
      await reset();
      const started = performance.now();
      const result = await tick(new Date(t0 + 500));
      ticks.push(performance.now() - started);
      statements = result.statements;
      if (result.enqueued.length !== params.due) {
        throw new Error(`a tick enqueued ${result.enqueued.length} occurrences of ${params.due}`);
      }
    }
    const tickMs = median(ticks);
    log(`  tick: ${round(tickMs)} ms for ${params.due} occurrences in ${statements} statements`);

    // Four ticks at once, each on its own pool.
    await reset();
    const pools = Array.from({ length: 4 }, () => connect({ connectionString: url, max: 2 }));
    const started = performance.now();
    await Promise.all(pools.map((p) => tick(new Date(t0 + 500), p)));
    const concurrentMs = performance.now() - started;
    await Promise.all(pools.map((p) => p.close()));
    const jobs = await withClient(url, async (c) =>
      Number((await c.query('select count(*) as n from skiplock.jobs')).rows[0].n),
    );
    const result: ScheduleTickResult = {
      schedules: params.schedules,
      due: params.due,
      tick_ms: round(tickMs),
      tick_statements: statements,
      occurrences_per_s: Math.round(params.due / (tickMs / 1000)),
      idle_tick_ms: round(median(idle)),
      idle_tick_statements: idleStatements,
      idle_sweep_ms: round(sweepMs),
      idle_sweep_with_probe_ms: round(probedSweepMs),
      concurrent_ticks_ms: round(concurrentMs),
      concurrent_jobs: jobs,
    };
    result.pgboss = await pgBossSchedulePass(url, params, log);
    return result;
  } finally {
    await db.close();
    await dropDatabase(server, 'skiplock_bench_schedules');
  }
}

/** The phase's section of bench/RESULTS.md. */
export function scheduleTickSection(r: ScheduleTickResult): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const pass = r.pgboss;
  return `## Run-time schedules: one tick (schedule_tick)

${n(r.schedules)} run-time schedules, ${n(r.due)} of them due, ticked as a worker invocation ticks them
(\`runRuntimeSchedules\`: a claim through the partial index on \`next_run_at\`, the occurrences in
JavaScript, one statement that moves them and inserts their jobs).${
    pass?.pass_ms !== undefined
      ? `
pg-boss: as many rows in its schedule table, as many due at the pass (\`0 * * * *\`, the others at
minutes 1 to 59), its pass read and evaluated as parts (repeated) and run whole once
(bench/schedule-tick-pgboss.ts); its pass files the due occurrences in an internal send-it queue,
whose worker sends each to its queue.`
      : ''
  }

| | figure |
| --- | --- |
| a tick that enqueues ${n(r.due)} occurrences | ${r.tick_ms} ms, ${r.tick_statements} statements, ${n(r.occurrences_per_s)} occurrences/s |
| 4 ticks at once on the same ${n(r.due)} | ${r.concurrent_ticks_ms} ms for all, ${n(r.concurrent_jobs)} jobs (one per occurrence) |
| a tick with nothing due (called on its own) | ${r.idle_tick_ms} ms, ${r.idle_tick_statements} statement |
| the invocation's sweep without / with the probe it carries (what a worker pays when nothing is due) | ${r.idle_sweep_ms} / ${r.idle_sweep_with_probe_ms} ms, no statement of its own |
${pass ? `| pg-boss 12's schedule pass over ${n(pass.rows)} schedules (every 30 s, one leader): read every row / evaluate every cron | ${n(pass.read_all_ms)} / ${n(pass.evaluate_ms)} ms (evaluation: cron-parser on 20,000 rows, scaled) |\n` : ''}${pass?.pass_ms !== undefined ? `${pgBossOwnPassRow(pass, r.due)}\n` : ''}
`;
}

/** pg-boss's own pass and forwarding, as a row of a two-column table (runs that measured it). */
export function pgBossOwnPassRow(pass: PgBossPassFigures, due: number): string {
  const n = (v: number | undefined) => (v ?? 0).toLocaleString('en-US');
  const waits = (pass.forward_clock_steps ?? 0) * (pass.forward_poll_s ?? 0);
  return `| pg-boss 12's own pass (one run, driven by its \`TestClock\` at the due minute): from its start to the ${n(due)} occurrences in its send-it queue / their forwarding, ${n(pass.forward_clock_steps)} fetches ${pass.forward_poll_s} s apart | ${n(pass.pass_ms)} ms / ${n(pass.forward_ms)} ms of work at most (the clock's settling between steps included), the last occurrence in its queue up to ${n(waits)} s after the pass in a deployment |`;
}
