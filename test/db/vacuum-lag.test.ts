import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SkiplockDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { claimJobs } from '../../db/statements/claim.js';
import { databaseUrl, openAdminPool, openDb, testDriver } from '../helpers/db.js';

// Every finished job leaves a dead entry in jobs_lease_idx (its running version was in it), and
// once its lease time has passed every claim's rescue looks in that range. With autovacuum behind,
// a claim that re-reads them all slows down with every job done (5× after 120,000 jobs); one that
// marks them as it passes reads them once.
//
// An entry can be marked only once no transaction may still see the row: the test waits for the
// transactions that began before the update to end (other test files'), in a database of its own.
const FINISHED = 5_000;
const database = `skiplock_vacuum_lag_${testDriver().replace('-', '_')}_${process.pid}`;
const urlOf = (name: string) => {
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  return url.toString();
};
let server: pg.Pool;
let admin: pg.Pool;
let db: SkiplockDb;

beforeAll(async () => {
  server = openAdminPool(databaseUrl(), 1);
  await server.query(`drop database if exists ${database} with (force)`);
  await server.query(`create database ${database}`);
  admin = openAdminPool(urlOf(database), 1);
  db = openDb({ connectionString: urlOf(database) });
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
  await admin?.end();
  await server.query(`drop database if exists ${database} with (force)`);
  await server.end();
});

/** Shared buffers a query touched (EXPLAIN ANALYZE, BUFFERS), after `setup` on the same connection. */
async function buffersOf(query: string, setup = ''): Promise<number> {
  const client = await admin.connect();
  try {
    if (setup) await client.query(setup);
    const { rows } = await client.query(`explain (analyze, buffers, format json) ${query}`);
    const plan = rows[0]['QUERY PLAN'][0].Plan;
    return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
  } finally {
    await client.query('reset all');
    client.release();
  }
}

describe(`claims while vacuum lags (${testDriver()})`, () => {
  it('a claim marks the dead lease entries it meets, so the next one passes them without the heap', async () => {
    await admin.query(
      `insert into skiplock.jobs (kind, state, attempt, lease_token, lease_expires_at, started_at, attempted_at)
       select 'k', 'running', 1, gen_random_uuid(), now() - interval '1 minute', now(), now() from generate_series(1, $1)`,
      [FINISHED],
    );
    const client = await admin.connect();
    let finishedBy: number;
    try {
      await client.query('begin');
      await client.query(
        `update skiplock.jobs set state = 'completed', finished_at = now(), lease_expires_at = null, lease_token = null`,
      );
      finishedBy = Number((await client.query('select xid(pg_current_xact_id())::text as xid')).rows[0].xid);
      await client.query('commit');
    } finally {
      client.release();
    }
    // The old row versions are dead to all only once no transaction anywhere in the cluster began
    // before that update (a snapshot's horizon is cluster-wide): wait for the other test files'.
    await expect
      .poll(
        async () =>
          (
            await server.query(
              `select count(*)::int as n from pg_stat_activity where pid <> pg_backend_pid()
                and (backend_xmin::text::bigint <= $1 or backend_xid::text::bigint <= $1)`,
              [finishedBy],
            )
          ).rows[0].n,
        { timeout: 30_000, interval: 50 },
      )
      .toBe(0);
    const lapsed = `select * from skiplock.jobs where state = 'running' and lease_expires_at <= now() order by lease_expires_at`;
    // The plan the planner picked for the rescue before: a bitmap scan, as costly every time.
    const bitmap = [
      await buffersOf(lapsed, 'set enable_indexscan = off'),
      await buffersOf(lapsed, 'set enable_indexscan = off'),
    ];
    expect(bitmap[1]).toBeGreaterThan(40);
    expect(bitmap[1]).toBeGreaterThanOrEqual((bitmap[0] as number) * 0.9);

    const claim = await claimJobs(db.executor, 'skiplock', {
      leases: [{ kind: 'k', leaseMs: 60_000 }],
      limit: 10,
      invocationId: 'inv-after-churn',
    });
    expect(claim.jobs).toEqual([]);
    // (The setup compiles the function on that connection and reads an empty range.)
    const after = await buffersOf(
      `select * from skiplock.lapsed_leases(now(), '{k}', 500)`,
      `select * from skiplock.lapsed_leases('-infinity', '{k}', 500)`,
    );
    expect(after).toBeLessThan((bitmap[1] as number) / 3);
  });
});
