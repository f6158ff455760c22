// A pause sent while many claimers run: a simulation of concurrent invocations, which depends on
// Postgres's locking, not on the driver that carries the statements. It runs once (pg); the
// statements themselves run on every driver in test/db/pauses.test.ts.
import { describe, expect, it } from 'vitest';
import { pause } from '../../core/controls.js';
import { claimJobs } from '../../db/statements/claim.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('pauses_concurrency', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const email = (i: number) => ({ to: `u${i}@example.com`, subject: 's' });
const opts = () => ({ schema: t.schema, by: 'ops@example.com' });

describe(`pause under concurrency (${testDriver()})`, () => {
  it('8 claimers on separate connections: no claim sent after the pause returned takes the paused queue', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 2_400 }, (_, i) => sendEmail.with(email(i), { queue: i % 2 ? 'webhooks' : 'emails' })),
    );
    const claimers = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    // Set once pause() has returned. One thread runs every claimer, so a claim reads it as it is
    // sent: before or after the pause, never both (no clock's resolution to tie on).
    let paused = false;
    const violations: string[] = [];
    let webhooksBefore = 0;
    try {
      const pausing = (async () => {
        // Let the claimers take some of both queues first.
        while (webhooksBefore < 40) await new Promise((resolve) => setImmediate(resolve));
        await pause(t.db, { queue: 'webhooks' }, opts());
        paused = true;
      })();
      await Promise.all(
        claimers.map(async (conn, c) => {
          while (true) {
            const sentAfterPause = paused;
            const { jobs } = await claimJobs(conn.executor, t.schema, {
              leases: LEASES,
              limit: 5,
              invocationId: `c${c}`,
            });
            if (jobs.length === 0 && paused) return;
            for (const job of jobs) {
              if (job.queue !== 'webhooks') continue;
              if (sentAfterPause) violations.push(job.id);
              else webhooksBefore++;
            }
          }
        }),
      );
      await pausing;
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
    expect(violations).toEqual([]);
    const { rows } = await t.admin.query(
      `select queue, state, count(*)::int as n from "${t.schema}".jobs group by queue, state order by queue, state`,
    );
    // Every email ran; the webhooks not taken before the pause are still queued, never attempted.
    const left = rows.find((r) => r.queue === 'webhooks' && r.state === 'queued')?.n ?? 0;
    expect(rows.find((r) => r.queue === 'emails')).toEqual({ queue: 'emails', state: 'running', n: 1_200 });
    expect(left).toBeGreaterThan(0);
    expect(left + webhooksBefore).toBe(1_200);
    const untouched = await t.admin.query(
      `select count(*)::int as n from "${t.schema}".jobs where queue = 'webhooks' and state = 'queued' and attempt = 0`,
    );
    expect(untouched.rows[0].n).toBe(left);
  });
});
