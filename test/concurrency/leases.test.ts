// Claims from many claimers at once: a simulation of concurrent invocations, which depends on
// Postgres's locking, not on the driver that carries the statements. It runs once (pg); the
// statements themselves run on every driver in test/db/leases.test.ts.
import { describe, expect, it } from 'vitest';
import { claimJobs } from '../../db/statements/claim.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('leases_concurrency', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const email = (i = 0) => ({ to: `u${i}@example.com`, subject: `s${i}` });

describe(`claim under concurrency (${testDriver()})`, () => {
  it('4 concurrent claimers on separate connections over 2,000 jobs: each job claimed exactly once', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 2000 }, (_, i) => sendEmail.with(email(i))),
    );
    const claimers = Array.from({ length: 4 }, () => openDb({ max: 1 }));
    try {
      const held = await Promise.all(
        claimers.map(async (conn, c) => {
          const mine: { id: string; token: string; claim: string }[] = [];
          while (true) {
            const { jobs } = await claimJobs(conn.executor, t.schema, {
              leases: LEASES,
              limit: 25,
              invocationId: `claimer-${c}`,
            });
            if (jobs.length === 0) return mine;
            const claim = `${c}-${mine.length}`;
            mine.push(...jobs.map((j) => ({ id: j.id, token: j.leaseToken, claim })));
          }
        }),
      );
      const all = held.flat();
      expect(all).toHaveLength(2000);
      expect(new Set(all.map((h) => h.id)).size).toBe(2000);
      // One lease token per claim statement: every claim issued its own, shared by its batch.
      const claims = new Set(all.map((h) => h.claim));
      expect(new Set(all.map((h) => h.token)).size).toBe(claims.size);
      expect(new Set(all.map((h) => `${h.claim}:${h.token}`)).size).toBe(claims.size);
      // More than one claimer got work: the claims really interleaved.
      expect(held.filter((h) => h.length > 0).length).toBeGreaterThan(1);
      const { rows } = await t.admin.query(
        `select count(*)::int as running, count(distinct lease_token)::int as tokens,
           bool_and(lease_expires_at > now()) as unexpired, bool_and(attempt = 1) as one_attempt
         from "${t.schema}".jobs where state = 'running'`,
      );
      expect(rows[0]).toEqual({ running: 2000, tokens: claims.size, unexpired: true, one_attempt: true });
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
  });
});
