import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RetryError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('core-ordering', (ctx) => {
  t = ctx;
});

describe(`ordering keys across concurrent invocations (${testDriver()})`, () => {
  it('8 invocations on separate connections: never two jobs of a key at once, each key in enqueue order, retries included', async () => {
    const KEYS = 20;
    const STEPS = 12;
    const running = new Set<string>();
    const started = new Map<string, number[]>();
    const overlaps: string[] = [];
    const failedOnce = new Set<string>();
    const step = defineJob({
      kind: 'step',
      payload: z.object({ key: z.string(), n: z.number() }),
      orderingKey: (p) => p.key,
      timeoutMs: 5_000,
      backoff: { type: 'constant', delayMs: 1, jitter: 0 },
      handler: async ({ key, n }) => {
        if (running.has(key)) overlaps.push(`${key}#${n}`);
        running.add(key);
        started.set(key, [...(started.get(key) ?? []), n]);
        await new Promise((resolve) => setImmediate(resolve));
        running.delete(key);
        // Every fourth step fails once: its key must wait for its retry.
        const id = `${key}#${n}`;
        if (n % 4 === 0 && !failedOnce.has(id)) {
          failedOnce.add(id);
          throw new RetryError('fails once');
        }
      },
    });
    // Keys interleaved, as events of many orders arrive.
    const requests = Array.from({ length: STEPS }, (_, n) =>
      Array.from({ length: KEYS }, (_, k) => step.with({ key: `order-${k}`, n })),
    ).flat();
    await createEnqueuer({ schema: t.schema }).enqueueMany(t.db, requests);
    const left = async () =>
      (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state in ('queued', 'running')`))
        .rows[0].n as number;
    const connections = Array.from({ length: 8 }, () => openDb({ max: 2 }));
    try {
      await Promise.all(
        connections.map(async (db) => {
          const worker = createWorker({
            db,
            schema: t.schema,
            jobs: [step],
            logger: silentLogger,
            concurrency: 5,
          });
          while ((await left()) > 0) {
            const summary = await worker.runInvocation({ remainingMs: 60_000 });
            if (summary.stoppedBecause === 'error') throw new Error(summary.error);
            if (summary.claimed === 0) await new Promise((resolve) => setImmediate(resolve));
          }
        }),
      );
    } finally {
      await Promise.all(connections.map((c) => c.close()));
    }
    expect(overlaps).toEqual([]);
    for (let k = 0; k < KEYS; k++) {
      const order = started.get(`order-${k}`) ?? [];
      // A step that failed once ran twice, back to back; otherwise each step once, in order.
      const expected = Array.from({ length: STEPS }, (_, n) => (n % 4 === 0 ? [n, n] : [n])).flat();
      expect(order).toEqual(expected);
    }
    const { rows } = await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state`);
    expect(rows).toEqual([{ state: 'completed', n: KEYS * STEPS }]);
  });
});
