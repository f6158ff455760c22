/**
 * The `schedule_tick` phase: run-time schedules at scale. 1,000,000 schedules, of which 1,000 are
 * due, ticked as a worker invocation ticks them (runRuntimeSchedules: a claim through the partial
 * index on next_run_at, then one statement that moves them and inserts their jobs): ms per tick,
 * statements per tick, occurrences per second; the same with nothing due, and the probe the
 * invocation's sweep carries (the cost an app with nothing due pays per invocation); 4 ticks at
 * once on the same 1,000 (no duplicates). Beside it, what pg-boss's schedule pass reads and
 * evaluates every 30 s on one leader with the same number of schedules: every row (getSchedules'
 * statement), and a cron evaluation per row (its parser, cron-parser, timed on 20,000 rows).
 */
import { CronExpressionParser } from 'cron-parser';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { silentLogger } from '../core/logger.js';
import { runRuntimeSchedules } from '../core/runtime-schedules.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { sweepDoomed } from '../db/statements/bury.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, withClient } from './db.js';

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
   * pg-boss 12's schedule pass over the same number of schedules, every 30 s on one leader: reading
   * every row, and evaluating every cron (cron-parser on 20,000 rows, scaled to all).
   */
  pgboss?: { read_all_ms: number; evaluate_ms: number; rows: number };
}

/** Rows of pg-boss's table evaluated to time its per-row cron evaluation (scaled to all of them). */
const SAMPLE = 20_000;
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
    result.pgboss = await pgBossPass(url, params, log);
    return result;
  } finally {
    await db.close();
    await dropDatabase(server, 'skiplock_bench_schedules');
  }
}

/**
 * pg-boss's schedule pass over the same number of schedules: its cron pass reads every row of its
 * schedule table (the statement of getSchedules) and evaluates each expression. Timed here as those
 * two parts: the read over pg, and its parser (cron-parser) on each row, timed on 20,000 rows and
 * scaled to all of them.
 */
async function pgBossPass(
  url: string,
  params: ScheduleTickParams,
  log: (line: string) => void,
): Promise<ScheduleTickResult['pgboss']> {
  const boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: 4 });
  boss.on('error', () => {});
  await boss.start();
  try {
    await boss.createQueue('digest');
    await withClient(url, (c) =>
      c.query(
        `insert into pgboss.schedule (name, key, cron, timezone, data, options)
         select 'digest', 'user-' || i, (i % 60) || ' * * * *', 'UTC', jsonb_build_object('user', i), '{}'
         from generate_series(1, $1::int) i`,
        [params.schedules],
      ),
    );
    await vacuumAnalyze(url);
    const reads: number[] = [];
    const evaluations: number[] = [];
    let rows = 0;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (let rep = 0; rep < params.reps; rep++) {
        const started = performance.now();
        const all = (
          await client.query(
            'SELECT name, key, kind, cron, timezone, data, options, created_on, updated_on FROM pgboss.schedule ORDER BY name, key',
          )
        ).rows as { cron: string; timezone: string }[];
        reads.push(performance.now() - started);
        rows = all.length;
        // Its parser (cron-parser) on the first SAMPLE rows, scaled to all of them.
        const now = new Date('2030-01-01T00:00:30Z');
        const evaluated = performance.now();
        let due = 0;
        for (const s of all.slice(0, SAMPLE)) {
          const previous = CronExpressionParser.parse(s.cron, { tz: s.timezone, currentDate: now }).prev();
          if (now.getTime() - previous.getTime() < 60_000) due++;
        }
        evaluations.push(((performance.now() - evaluated) * all.length) / Math.min(SAMPLE, all.length));
        if (due === 0) throw new Error('pg-boss pass: nothing due');
      }
    } finally {
      await client.end();
    }
    const pass = { read_all_ms: round(median(reads)), evaluate_ms: Math.round(median(evaluations)), rows };
    log(`  pg-boss pass over ${rows} schedules: read ${pass.read_all_ms} ms, evaluate ${pass.evaluate_ms} ms`);
    return pass;
  } finally {
    await boss.stop({ graceful: false }).catch(() => {});
  }
}

/** The phase's section of bench/RESULTS.md. */
export function scheduleTickSection(r: ScheduleTickResult): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const pass = r.pgboss;
  return `## Run-time schedules: one tick (schedule_tick)

${n(r.schedules)} run-time schedules, ${n(r.due)} of them due, ticked as a worker invocation ticks them
(\`runRuntimeSchedules\`: a claim through the partial index on \`next_run_at\`, the occurrences in
JavaScript, one statement that moves them and inserts their jobs).

| | figure |
| --- | --- |
| a tick that enqueues ${n(r.due)} occurrences | ${r.tick_ms} ms, ${r.tick_statements} statements, ${n(r.occurrences_per_s)} occurrences/s |
| 4 ticks at once on the same ${n(r.due)} | ${r.concurrent_ticks_ms} ms for all, ${n(r.concurrent_jobs)} jobs (one per occurrence) |
| a tick with nothing due (called on its own) | ${r.idle_tick_ms} ms, ${r.idle_tick_statements} statement |
| the invocation's sweep without / with the probe it carries (what a worker pays when nothing is due) | ${r.idle_sweep_ms} / ${r.idle_sweep_with_probe_ms} ms, no statement of its own |
${pass ? `| pg-boss 12's schedule pass over ${n(pass.rows)} schedules (every 30 s, one leader): read every row / evaluate every cron | ${n(pass.read_all_ms)} / ${n(pass.evaluate_ms)} ms (evaluation: cron-parser on 20,000 rows, scaled) |\n` : ''}
`;
}
