import type pg from 'pg';
import { z } from 'zod';
import { defineJob } from '../core/jobs.js';
import { createScheduler } from '../core/runtime-schedules.js';
import type { SkiplockDb } from '../db/connect.js';
import { CHAOS_TIMEOUT_MS } from './job.js';
import { connectFaulty, type FaultyConnection } from './stand-ins.js';

/**
 * Run-time schedules under the chaos: a set of schedules, each every second from the same start,
 * written with applySchedules through the driver under test and its faulty stand-in (sent again
 * blindly until answered: applying a set twice writes nothing), ticked by every worker process
 * through the same faults, kills included. At the end every occurrence from each schedule's first
 * (the first at or after its write: a write that lands late skips none of the checked ones) to its
 * last one must have become exactly one job: none missing, none doubled, whatever the
 * lost answers, the claims a killed tick left behind and the concurrent ticks.
 */

/** The kind the run-time schedules enqueue; each execution records the occurrence it ran for. */
export const RUNTIME_KIND = 'chaos-runtime';
export const RUNTIME_SET = 'chaos';

/** Each execution records its job's occurrence (its dedupe key, `<key>@<occurrence>`), read from its row. */
export function chaosRuntimeJob(pool: pg.Pool, schema: string) {
  return defineJob({
    kind: RUNTIME_KIND,
    payload: z.object({ schedule: z.number() }),
    timeoutMs: CHAOS_TIMEOUT_MS,
    handler: async (_p, ctx) => {
      await pool.query(
        `insert into "${schema}".chaos_runtime_runs (occurrence, job_id)
         select dedupe_key, id from "${schema}".jobs where id = $1`,
        [ctx.id],
      );
    },
  });
}

export interface RuntimeScheduleCheck {
  schedules: number;
  occurrences: number;
  duplicated: number;
  missing: number;
  /** applySchedules calls sent again after a failure (lost answers included). */
  applyRetries: number;
  /** Up to five missing occurrences, each with its schedule's row at the check (empty when none). */
  missingSample: string;
}

export function runtimeScheduleChaos(options: {
  connection: FaultyConnection;
  admin: pg.Pool;
  direct: SkiplockDb;
  schema: string;
  count: number;
}) {
  const { admin, schema, count } = options;
  const s = `"${schema}"`;
  const scheduler = createScheduler({ schema });
  const job = chaosRuntimeJob(admin, schema);
  let start = new Date();
  /** Each schedule's first occurrence as written: the first at or after the write (none before it). */
  let firsts: { key: string; first: string }[] = [];
  let applyRetries = 0;
  const specs = () =>
    Array.from({ length: count }, (_, i) => ({
      key: `chaos-rs-${i}`,
      job,
      everyMs: 1_000,
      startAt: start,
      payload: { schedule: i },
      // Every occurrence is enqueued, late or not: each one is checked.
      missed: 1000,
    }));

  return {
    job,
    /** Creates the table and applies the set through the faulty driver; returns once it is written. */
    async setup(): Promise<void> {
      await admin.query(`create table ${s}.chaos_runtime_runs (occurrence text not null, job_id bigint not null)`);
      // The first occurrence a few seconds from now, on a whole second.
      start = new Date(Math.ceil((Date.now() + 3_000) / 1000) * 1000);
      const db = connectFaulty(options.connection);
      try {
        for (let tries = 1; ; tries++) {
          try {
            await scheduler.applySchedules(db, RUNTIME_SET, specs());
            break;
          } catch (err) {
            if (tries >= 200) throw new Error(`schedules not applied after ${tries} tries: ${(err as Error).message}`);
            applyRetries++;
          }
        }
      } finally {
        await db.close();
      }
      const { rows } = await admin.query(`select count(*)::int as n from ${s}.runtime_schedules where set_id = $1`, [
        RUNTIME_SET,
      ]);
      if (rows[0].n !== count) throw new Error(`applied ${rows[0].n} run-time schedules of ${count}`);
      // A write that lands after `start` (a slow link, a loaded machine) makes a schedule whose first
      // occurrence is the next one after the write: the occurrences to check begin there. Read before
      // any worker runs, so no tick has moved them yet.
      firsts = (
        await admin.query(
          `select key, to_char(next_run_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as first
           from ${s}.runtime_schedules where set_id = $1`,
          [RUNTIME_SET],
        )
      ).rows;
      const late = firsts.filter((f) => new Date(f.first).getTime() < start.getTime());
      if (late.length > 0) throw new Error(`run-time schedules start before their startAt: ${late[0]?.key}`);
    },
    /** Stops the schedules (a pause per schedule, no fault): the occurrences to check end here. */
    async stop(): Promise<void> {
      for (const spec of specs()) await scheduler.pauseSchedule(options.direct, spec.key);
    },
    /** Every occurrence from the start to each schedule's last one: one job each. */
    async check(): Promise<RuntimeScheduleCheck> {
      const one = async (text: string, params: unknown[] = []) =>
        Number((await admin.query(text, params)).rows[0]?.n ?? 0);
      // Each occurrence a schedule moved past, from its first as written, by its dedupe key.
      const expected = `select r.key || '@' || to_char(g.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as occurrence
        from ${s}.runtime_schedules r
        join jsonb_to_recordset($1::text::jsonb) f(key text, first timestamptz) on f.key = r.key
        cross join lateral generate_series(f.first, r.last_occurrence, interval '1 second') g(at)
        where r.set_id = '${RUNTIME_SET}'`;
      const seen = `select dedupe_key as occurrence, id as job_id from ${s}.jobs where kind = '${RUNTIME_KIND}'
        union select occurrence, job_id from ${s}.chaos_runtime_runs`;
      const params = [JSON.stringify(firsts)];
      return {
        schedules: count,
        occurrences: await one(`select count(distinct occurrence) as n from (${seen}) x`),
        duplicated: await one(
          `select count(*) as n from (select occurrence from (${seen}) x group by occurrence having count(distinct job_id) > 1) d`,
        ),
        missing: await one(
          `select count(*) as n from (${expected}) e where not exists (select 1 from (${seen}) x where x.occurrence = e.occurrence)`,
          params,
        ),
        applyRetries,
        // What a failure needs to be read: which occurrences, and where their schedules stood.
        missingSample: String(
          (
            await admin.query(
              `select string_agg(format('%s (last %s, next %s, claimed %s, version %s)', e.occurrence,
                 r.last_occurrence, r.next_run_at, r.claimed_until, r.version), '; ') as sample
               from (select * from (${expected}) e where not exists
                 (select 1 from (${seen}) x where x.occurrence = e.occurrence) order by 1 limit 5) e
               join ${s}.runtime_schedules r on e.occurrence like r.key || '@%'`,
              params,
            )
          ).rows[0]?.sample ?? '',
        ),
      };
    },
  };
}
