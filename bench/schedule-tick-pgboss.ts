/**
 * pg-boss beside skiplock in the `schedule_tick` phase (bench/schedule-tick.ts): the same number of
 * schedules in pg-boss's schedule table, `due` of them due at the pass (`0 * * * *`, the others at
 * minutes 1 to 59 of the hour), so both sides enqueue the same 1,000 occurrences.
 *
 * pg-boss 12 has no due index: one leader's cron pass, every `cronMonitorIntervalSeconds` (30),
 * reads every row, evaluates every cron, files the due occurrences in its internal send-it queue,
 * and a worker on that queue sends each one to its own queue (50 a fetch, a fetch every
 * `cronWorkerIntervalSeconds`, 5). Measured two ways:
 *
 * - the parts, repeated: the pass's read (its statement) and a cron evaluation per row (cron-parser
 *   as the pass calls it, timed on 20,000 rows and scaled to all);
 * - pg-boss's own pass, once: an instance started with `schedule: true` and pg-boss's `TestClock` at
 *   the due minute runs it at start, from the read to the send-it jobs; then the send-it worker
 *   forwards them, the clock stepping over its waits between fetches (counted: each is 5 s of wall
 *   time in a deployment before the last occurrence is in its queue). One run: over 1,000,000 rows
 *   the pass is minutes of CPU. Before the forwarding the schedules that were not due are deleted:
 *   the stepped clock would run the pass again every 30 s, and those passes are not forwarding.
 */
import { CronExpressionParser } from 'cron-parser';
import pg from 'pg';
import { PgBoss, TestClock } from 'pg-boss';
import { vacuumAnalyze, withClient } from './db.js';

export interface PgBossPassFigures {
  rows: number;
  /** The pass's read of every row, median ms. */
  read_all_ms: number;
  /** cron-parser on every row (timed on 20,000, scaled), median ms. */
  evaluate_ms: number;
  /** pg-boss's own pass, one run: from its instance's start to the due occurrences in its send-it queue, ms. */
  pass_ms?: number;
  /** Occurrences that pass filed (must equal the phase's `due`). */
  pass_due?: number;
  /**
   * The send-it worker forwarding them to their queue: wall ms with its waits stepped over by the
   * clock — an upper bound on the work, as it includes the clock's settling after each step.
   */
  forward_ms?: number;
  /** Steps of `forward_poll_s` the clock took until the last was in its queue: waits of the worker, each real time in a deployment. */
  forward_clock_steps?: number;
  forward_poll_s?: number;
}

/** Rows of pg-boss's table evaluated to time its per-row cron evaluation (scaled to all of them). */
const SAMPLE = 20_000;
const SEND_IT = '__pgboss__send-it';
/** pg-boss's default `cronWorkerIntervalSeconds`: the send-it worker's wait between fetches. */
const SEND_IT_POLL_S = 5;
/** The instant of the pass: half a minute past the hour, so `0 * * * *` is due and minute 59 is not. */
const PASS_AT = Date.parse('2030-01-01T00:00:30Z');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const round = (n: number) => Math.round(n * 10) / 10;

/** pg-boss's side of the phase on `url` (a database the skiplock side has used: pg-boss has its own schema). */
export async function pgBossSchedulePass(
  url: string,
  params: { schedules: number; due: number; reps: number },
  log: (line: string) => void,
): Promise<PgBossPassFigures> {
  const boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: 4 });
  boss.on('error', () => {});
  await boss.start();
  try {
    await boss.createQueue('digest');
  } finally {
    await boss.stop({ graceful: false });
  }
  await withClient(url, (c) =>
    c.query(
      `insert into pgboss.schedule (name, key, cron, timezone, data, options)
       select 'digest', 'user-' || i, case when i <= $2 then '0' else (1 + i % 59)::text end || ' * * * *', 'UTC',
         jsonb_build_object('user', i), '{}'
       from generate_series(1, $1::int) i`,
      [params.schedules, params.due],
    ),
  );
  await vacuumAnalyze(url);
  const parts = await passParts(url, params);
  log(`  pg-boss pass over ${parts.rows} schedules: read ${parts.read_all_ms} ms, evaluate ${parts.evaluate_ms} ms`);
  const own = await ownPass(url, params.due);
  log(
    `  pg-boss's own pass: ${own.pass_ms} ms to file ${own.pass_due} occurrences; forwarded in ${own.forward_ms} ms of work and ${own.forward_clock_steps} waits of ${own.forward_poll_s} s`,
  );
  return { ...parts, ...own };
}

/** The pass's read, repeated, and its evaluation of every cron (timed on SAMPLE rows, scaled). */
async function passParts(
  url: string,
  params: { schedules: number; due: number; reps: number },
): Promise<Pick<PgBossPassFigures, 'rows' | 'read_all_ms' | 'evaluate_ms'>> {
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
      // As its pass reads an occurrence: the latest at or before the pass, within the last minute.
      const evaluated = performance.now();
      let due = 0;
      for (const s of all.slice(0, SAMPLE)) {
        const previous = CronExpressionParser.parse(s.cron, {
          tz: s.timezone,
          strict: false,
          currentDate: new Date(PASS_AT + 1),
        }).prev();
        if (PASS_AT - previous.getTime() < 60_000) due++;
      }
      evaluations.push(((performance.now() - evaluated) * all.length) / Math.min(SAMPLE, all.length));
      if (due === 0 && params.due > 0) throw new Error('pg-boss pass: nothing due in the sample');
    }
  } finally {
    await client.end();
  }
  return { rows, read_all_ms: round(median(reads)), evaluate_ms: Math.round(median(evaluations)) };
}

/** pg-boss's own pass at PASS_AT, then its send-it worker forwarding what the pass filed. */
async function ownPass(url: string, due: number) {
  const check = new pg.Client({ connectionString: url });
  await check.connect();
  const count = async (name: string) =>
    Number((await check.query('select count(*)::int as n from pgboss.job where name = $1', [name])).rows[0].n);
  const clock = new TestClock(PASS_AT);
  const boss = new PgBoss({ connectionString: url, schedule: true, supervise: false, max: 4, clock });
  boss.on('error', () => {});
  try {
    // The pass starts with the instance (the first runs at start) and ends when its insert commits.
    const started = performance.now();
    await boss.start();
    let filed = await count(SEND_IT);
    while (filed < due || boss.isTimekeeping()) {
      if (performance.now() - started > 900_000) throw new Error(`pg-boss's pass filed ${filed} of ${due} in 15 min`);
      await new Promise((resolve) => setTimeout(resolve, 10));
      filed = await count(SEND_IT);
    }
    const passMs = performance.now() - started;
    if (filed !== due) throw new Error(`pg-boss's pass filed ${filed} occurrences, not ${due}`);
    // The send-it worker waits cronWorkerIntervalSeconds between fetches: step the clock over each wait.
    // Every 30 s of that clock pg-boss's pass runs again and reads every schedule, so the rows that
    // were not due go first: the forwarding is measured, not three more passes over all the rows
    // (454 s of a million-row run). The due rows stay, for the forward's last_job_id update.
    await check.query(`delete from pgboss.schedule where cron <> '0 * * * *'`);
    const forwarding = performance.now();
    let steps = 0;
    while ((await count('digest')) < filed) {
      if (++steps > 10 * Math.ceil(filed / 50) + 10) throw new Error("pg-boss's send-it worker stalled");
      await clock.tick(SEND_IT_POLL_S * 1000);
    }
    return {
      pass_ms: Math.round(passMs),
      pass_due: filed,
      forward_ms: Math.round(performance.now() - forwarding),
      forward_clock_steps: steps,
      forward_poll_s: SEND_IT_POLL_S,
    };
  } finally {
    await boss.stop({ graceful: false }).catch(() => {});
    await check.end();
  }
}
