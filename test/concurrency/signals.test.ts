// Signals racing waits across many connections: a simulation of concurrent senders and worker
// invocations, which depends on Postgres's locking (the key's advisory lock), not on the driver.
// It runs once (pg); test/drivers/steps.test.ts sends and waits through every driver.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('signals_concurrency', (ctx) => {
  t = ctx;
});

describe(`signals under concurrency (${testDriver()})`, () => {
  it('1,000 signals racing 1,000 waits (half sent before): each job resumes exactly once, with its own payload', async () => {
    const JOBS = 1_000;
    const enqueuer = createEnqueuer({ schema: t.schema });
    const resumed = new Map<number, number>();
    const waiter = defineJob({
      kind: 'waiter',
      payload: z.object({ n: z.number() }),
      handler: async (p, ctx) => {
        // An hour: a wake-up the lock let slip would leave the job waiting past the end of this test.
        const got = await ctx.waitForSignal<{ n: number }>('go', { key: `go:${p.n}`, timeoutMs: 3_600_000 });
        resumed.set(p.n, (resumed.get(p.n) ?? 0) + 1);
        if (got.timedOut || got.payload.n !== p.n) throw new Error(`job ${p.n} got ${JSON.stringify(got)}`);
        return got.payload.n;
      },
    });
    await enqueuer.enqueueMany(
      t.db,
      Array.from({ length: JOBS }, (_, n) => waiter.with({ n })),
    );
    const senders = Array.from({ length: 6 }, () => openDb({ max: 1 }));
    const workers = Array.from({ length: 3 }, () => openDb({ max: 4 }));
    try {
      const send = async (numbers: number[]) => {
        const queue = [...numbers];
        await Promise.all(
          senders.map(async (db) => {
            for (let n = queue.shift(); n !== undefined; n = queue.shift()) await enqueuer.signal(db, `go:${n}`, { n });
          }),
        );
      };
      // Half the signals before any job waits (odd n); the rest while the workers run.
      await send(Array.from({ length: JOBS / 2 }, (_, i) => 2 * i + 1));
      const invoke = (db: (typeof workers)[number]) =>
        createWorker({
          db,
          schema: t.schema,
          jobs: [waiter],
          logger: silentLogger,
          concurrency: 20,
          batchSize: 50,
        }).runInvocation({
          remainingMs: 60_000,
        });
      const sending = send(Array.from({ length: JOBS / 2 }, (_, i) => 2 * i));
      let running = true;
      const looping = workers.map(async (db) => {
        while (running) await invoke(db);
      });
      await sending;
      running = false;
      await Promise.all(looping);
      // Every job that waited when its signal came was woken (run_at = now): a last pass runs them.
      for (let pass = 0; pass < 5; pass++) {
        const left = await t.admin.query(
          `select count(*)::int as n from "${t.schema}".jobs where state <> 'completed'`,
        );
        if (left.rows[0].n === 0) break;
        await invoke(workers[0] as (typeof workers)[number]);
      }
      const states = await t.admin.query(
        `select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`,
      );
      expect(states.rows).toEqual([{ state: 'completed', n: JOBS }]);
      expect(resumed.size).toBe(JOBS);
      expect([...resumed.values()].every((count) => count === 1)).toBe(true);
      const signals = await t.admin.query(
        `select count(*)::int as n from "${t.schema}".signals g join "${t.schema}".jobs j on j.id = g.taken_by
         where (j.payload->>'n') = split_part(g.key, ':', 2)`,
      );
      expect(signals.rows[0].n).toBe(JOBS);
    } finally {
      await Promise.all([...senders, ...workers].map((db) => db.close()));
    }
  });
});
