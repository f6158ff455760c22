// Claim lanes under many claimers at once: a simulation of concurrent invocations, which depends
// on Postgres's locking, not on the driver that carries the statements. It runs once (pg); the
// statements themselves run on every driver in test/db/lanes.test.ts.
import { describe, expect, it } from 'vitest';
import { CLAIM_LANES, claimJobs, LANE_RUN } from '../../db/statements/claim.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('lanes_concurrency', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [{ kind: 'send-email', leaseMs: 30_000 }];
const enqueue = (n: number) =>
  q.enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => sendEmail.with({ to: `u${i}@example.com`, subject: 's' })),
  );

describe(`claim lanes under concurrency (${testDriver()})`, () => {
  it('16 concurrent claimers on separate connections, each on its own lane in turn: every job claimed exactly once', async () => {
    const total = LANE_RUN * CLAIM_LANES * 3;
    await enqueue(total);
    const claimers = Array.from({ length: 16 }, () => openDb({ max: 1 }));
    try {
      const held = await Promise.all(
        claimers.map(async (conn, c) => {
          const mine: string[] = [];
          for (let round = 0; ; round++) {
            const { jobs } = await claimJobs(conn.executor, t.schema, {
              leases: LEASES,
              limit: 25,
              invocationId: `claimer-${c}`,
              lane: (c + round) % CLAIM_LANES,
            });
            if (jobs.length === 0) return mine;
            mine.push(...jobs.map((j) => j.id));
          }
        }),
      );
      const all = held.flat();
      expect(all).toHaveLength(total);
      expect(new Set(all).size).toBe(total);
      expect(held.filter((h) => h.length > 0).length).toBeGreaterThan(1);
      const { rows } = await t.admin.query(
        `select count(*) filter (where state = 'running' and attempt = 1)::int as running, count(*)::int as n
         from "${t.schema}".jobs`,
      );
      expect(rows[0]).toEqual({ running: total, n: total });
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
  });
});
