// A claim whose statement Postgres rolls back for a reason that a second run resolves is run once
// more: here a deadlock (40P01) between its settle and another transaction holding one of the
// settled rows, as a claim rescuing a row whose lease lapsed under its still-running holder does.
import { describe, expect, it } from 'vitest';
import { listenToStatements } from '../../db/statement-listeners.js';
import { claimJobs } from '../../db/statements/claim.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('claim_retry', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [{ kind: 'send-email', leaseMs: 30_000 }];
const email = (i: number) => ({ to: `u${i}@example.com`, subject: `s${i}` });

describe(`a claim rolled back by a deadlock (${testDriver()})`, () => {
  it('runs once more and settles every outcome, where another transaction and its settle waited on each other', async () => {
    const ids = (await q.enqueueMany(t.db, [sendEmail.with(email(1)), sendEmail.with(email(2))])).map((r) => r.id);
    const [low, high] = [...ids].sort((a, b) => Number(a) - Number(b)) as [string, string];
    const { jobs } = await claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 2, invocationId: 'holder' });
    expect(jobs).toHaveLength(2);
    const settle = jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));

    // Another transaction holds the higher id; the claim's settle takes the lower one (rows in id
    // order) and waits for it; the other transaction then waits for the lower one: a cycle.
    const other = await t.admin.connect();
    let sent = 0;
    const stop = listenToStatements((text) => {
      if (text.includes('settle_input')) sent++;
    });
    try {
      await other.query('begin');
      await other.query(`select id from "${t.schema}".jobs where id = $1 for update`, [high]);
      const claimed = claimJobs(t.db.executor, t.schema, {
        leases: LEASES,
        limit: 1,
        invocationId: 'holder',
        settle,
      });
      // Until the claim's backend waits for this transaction's lock on the higher id.
      const myPid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      for (;;) {
        const { rows } = await t.admin.query(
          'select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))',
          [myPid],
        );
        if (rows[0].n > 0) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      // Now this transaction waits for the claim's lock on the lower id; the claim, waiting longer,
      // is the one Postgres rolls back (deadlock_timeout, 1 s), and this update goes through.
      await other.query(`update "${t.schema}".jobs set updated_at = updated_at where id = $1`, [low]);
      await other.query('commit');
      const result = await claimed;
      expect(result.settled.lost.size).toBe(0);
    } finally {
      stop();
      other.release();
    }
    // The statement ran twice: the deadlock's rollback and the run that settled.
    expect(sent).toBe(2);
    const states = await t.admin.query(`select id::text, state from "${t.schema}".jobs order by id`);
    expect(states.rows).toEqual([
      { id: low, state: 'completed' },
      { id: high, state: 'completed' },
    ]);
  });
});
