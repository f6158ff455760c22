import { afterAll, describe, expect, it } from 'vitest';
import { claimJobs } from '../../db/statements/claim.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('vacuum-lag', (ctx) => {
  t = ctx;
});

const FINISHED = 5_000;

/** Shared buffers a query touched (EXPLAIN ANALYZE, BUFFERS), on the admin connection. */
async function buffersOf(query: string, setup = ''): Promise<number> {
  const client = await t.admin.connect();
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

// Every finished job leaves a dead entry in jobs_lease_idx (its running version was in it), and
// once its lease time has passed every claim's rescue looks in that range. With autovacuum
// behind, a claim that re-reads them all slows down with every job done (5× after 10 minutes at
// 200 jobs/s); one that marks them as it passes reads them once.
describe(`claims while vacuum lags (${testDriver()})`, () => {
  afterAll(() => t.admin.query(`vacuum "${t.schema}".jobs`));

  it('a claim marks the dead lease entries it meets, so the next one passes them without the heap', async () => {
    await t.admin.query(
      `insert into "${t.schema}".jobs (kind, state, attempt, lease_token, lease_expires_at, started_at, attempted_at)
       select 'k', 'running', 1, gen_random_uuid(), now() - interval '1 minute', now(), now() from generate_series(1, $1)`,
      [FINISHED],
    );
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'completed', finished_at = now(), lease_expires_at = null, lease_token = null`,
    );
    const lapsed = `select * from "${t.schema}".jobs where state = 'running' and lease_expires_at <= now() order by lease_expires_at`;
    // The plan the planner picked for the rescue before: a bitmap scan, as costly every time.
    const bitmap = [
      await buffersOf(lapsed, 'set enable_indexscan = off'),
      await buffersOf(lapsed, 'set enable_indexscan = off'),
    ];
    expect(bitmap[1]).toBeGreaterThan(40);
    expect(bitmap[1]).toBeGreaterThanOrEqual((bitmap[0] as number) * 0.9);

    const claim = await claimJobs(t.db.db, t.schema, {
      leases: [{ kind: 'k', leaseMs: 60_000 }],
      limit: 10,
      invocationId: 'inv-after-churn',
    });
    expect(claim.jobs).toEqual([]);
    // (The warm-up compiles the function on that connection and reads an empty range.)
    const after = await buffersOf(
      `select * from "${t.schema}".lapsed_leases(now(), '{k}', 500)`,
      `select * from "${t.schema}".lapsed_leases('-infinity', '{k}', 500)`,
    );
    expect(after).toBeLessThan((bitmap[1] as number) / 3);
  });
});
