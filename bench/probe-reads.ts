/**
 * `npx tsx bench/probe-reads.ts [finished] [dead]`: the operator's reads on a table that keeps a day
 * of finished jobs — `skiplock stats` (queueStats) and the console overview's charts (activitySeries
 * for the hour by minute and the day by hour, all queues and one) — timed, with their plans
 * (EXPLAIN ANALYZE, BUFFERS) on stderr. Defaults: 2,000,000 completed over the last day, 100,000 dead.
 */
import pg from 'pg';
import { activitySeries, stats } from '../core/admin.js';
import { runMaintenance } from '../core/maintenance.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';

const finished = Number(process.argv[2] ?? 2_000_000);
const dead = Number(process.argv[3] ?? 100_000);
const database = await resolveTestDatabase();
const schema = `probe_reads_${process.pid}`;
const admin = new pg.Pool({ connectionString: database.url, max: 2 });
const db = connect({ connectionString: database.url, max: 2, statementTimeoutMs: 0 });

async function timed(label: string, work: () => Promise<unknown>): Promise<void> {
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    await work();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  console.log(`${label}: median ${times[2]?.toFixed(1)} ms (min ${times[0]?.toFixed(1)}, max ${times[4]?.toFixed(1)})`);
}

try {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await migrate(db, { schema });
  console.log(
    `writing ${finished.toLocaleString('en')} completed jobs over the last day, ${dead.toLocaleString('en')} dead`,
  );
  const queues = ['emails', 'webhooks', 'reports', 'default'];
  for (let done = 0; done < finished; done += 250_000) {
    await admin.query(
      `insert into "${schema}".jobs (kind, queue, state, attempt, started_at, attempted_at, finished_at)
       select 'k' || (n % 7), (array['${queues.join("','")}'])[1 + n % 4], 'completed', 1, t, t, t
       from (select n, now() - (n * 43) * interval '1 millisecond' as t
             from generate_series($2::bigint, $2::bigint + $1 - 1) n) s`,
      [Math.min(250_000, finished - done), done],
    );
  }
  await admin.query(
    `insert into "${schema}".jobs (kind, queue, state, attempt, started_at, attempted_at, finished_at, dead_reason)
     select 'k' || (n % 7), (array['${queues.join("','")}'])[1 + n % 4], 'dead', 1, t, t, t, 'max_attempts'
     from (select n, now() - (n * 6048) * interval '1 millisecond' as t from generate_series(1, $1) n) s`,
    [dead],
  );
  await admin.query(`vacuum analyze "${schema}".jobs`);
  await runMaintenance(db, { schema, completedRetentionMs: 7 * 86_400_000, deadRetentionMs: 30 * 86_400_000 });

  await timed('stats (queue_stats)', () => stats(db, { schema }));
  await timed('console hour by minute, all queues', () =>
    activitySeries(db, { schema, bucketSeconds: 60, buckets: 60 }),
  );
  await timed('console day by hour, all queues', () =>
    activitySeries(db, { schema, bucketSeconds: 3600, buckets: 24 }),
  );
  await timed('console day by hour, ?queue=emails', () =>
    activitySeries(db, { schema, bucketSeconds: 3600, buckets: 24, queue: 'emails' }),
  );
  const plan = await admin.query(`explain (analyze, buffers, costs off) select * from "${schema}".queue_stats`);
  process.stderr.write(`${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
} finally {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await db.close();
  await admin.end();
  await database.stop();
}
