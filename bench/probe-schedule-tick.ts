/**
 * `npx tsx bench/probe-schedule-tick.ts [schedules] [due]`: where a run-time schedule tick spends
 * its time — the claim, the computation in JavaScript, the fire — on a fresh database.
 */
import { silentLogger } from '../core/logger.js';
import { planRuntimeTick } from '../core/runtime-schedules.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { claimDueRuntimeSchedules, fireRuntimeSchedules } from '../db/statements/runtime-schedules.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { dropDatabase, freshDatabase, vacuumAnalyze, withClient } from './db.js';

const schedules = Number(process.argv[2] ?? 100_000);
const due = Number(process.argv[3] ?? 1_000);
const database = await resolveTestDatabase();
const url = await freshDatabase(database.url, 'skiplock_probe_schedules');
const db = connect({ connectionString: url, max: 4 });
try {
  await migrate(db, {});
  const t0 = Date.parse('2030-01-01T00:00:00Z');
  await withClient(url, (c) =>
    c.query(
      `insert into skiplock.runtime_schedules (key, kind, interval_ms, payload, queue, job_options, next_run_at, created_at, updated_at)
       select 'user-' || i, 'digest', 3600000, jsonb_build_object('user', i), 'default',
         '{"priority":0,"max_attempts":3,"deadline_ms":null,"correlation_id":null,"ordering_key":null,"ordering_hold":false,"concurrency_key":null,"destination":null}',
         a + interval '1 hour', a, a
       from generate_series(1, $1::int) i,
         lateral (select to_timestamp($2::float8 / 1000) - interval '1 hour'
           + case when i <= $3 then interval '0' else (1 + (i % 3599)) * interval '1 second' end as a) x`,
      [schedules, t0, due],
    ),
  );
  await vacuumAnalyze(url);
  for (let rep = 0; rep < 3; rep++) {
    await withClient(url, async (c) => {
      await c.query('truncate skiplock.jobs');
      await c.query(
        `update skiplock.runtime_schedules set next_run_at = created_at + interval '1 hour', claimed_until = null
         where key in (select 'user-' || i from generate_series(1, $1::int) i)`,
        [due],
      );
    });
    const now = new Date(t0 + 500);
    let at = performance.now();
    const claim = await claimDueRuntimeSchedules(db.executor, 'skiplock', { limit: 1000, leaseMs: 30_000, now });
    const claimMs = performance.now() - at;
    at = performance.now();
    const plan = planRuntimeTick(claim.rows, claim.now, silentLogger);
    const planMs = performance.now() - at;
    at = performance.now();
    const fired =
      process.env.MOVES_ONLY === '1'
        ? await fireRuntimeSchedules(db.executor, 'skiplock', { ...plan, rows: [], scheduleOf: [] })
        : await fireRuntimeSchedules(db.executor, 'skiplock', plan);
    const fireMs = performance.now() - at;
    console.log(
      `claim ${claimMs.toFixed(1)} ms (${claim.rows.length} rows), plan ${planMs.toFixed(1)} ms (${plan.rows.length} jobs), fire ${fireMs.toFixed(1)} ms (${fired.moved.size} moved)`,
    );
  }
} finally {
  await db.close();
  await dropDatabase(database.url, 'skiplock_probe_schedules');
  await database.stop();
}
