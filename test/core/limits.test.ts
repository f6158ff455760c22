import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('core-limits', (ctx) => {
  t = ctx;
});

describe(`limits declared in code, across concurrent invocations (${testDriver()})`, () => {
  it('6 invocations on separate connections: a queue limit, a per-key limit and a kind limit hold for the handlers', async () => {
    const tenants = defineQueue({ name: 'tenants', concurrency: 4, keyConcurrency: 2 });
    const live = new Map<string, number>();
    let peak = { queue: 0, kind: 0 };
    const breaches: string[] = [];
    const track = async (scope: string, key: string | undefined, body: () => Promise<void>) => {
      const names = [scope, ...(key ? [`key:${key}`] : [])];
      for (const n of names) live.set(n, (live.get(n) ?? 0) + 1);
      const q = live.get('tenants') ?? 0;
      const k = live.get('report') ?? 0;
      peak = { queue: Math.max(peak.queue, q), kind: Math.max(peak.kind, k) };
      if (q > 4) breaches.push(`tenants ${q}`);
      if (k > 1) breaches.push(`report ${k}`);
      if (key && (live.get(`key:${key}`) ?? 0) > 2) breaches.push(`key ${key}`);
      try {
        await body();
      } finally {
        for (const n of names) live.set(n, (live.get(n) ?? 0) - 1);
      }
    };
    const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
    const sync = defineJob({
      kind: 'sync',
      queue: tenants,
      payload: z.object({ tenant: z.string(), n: z.number() }),
      concurrencyKey: (p) => p.tenant,
      handler: (p) => track('tenants', p.tenant, turn),
    });
    const report = defineJob({
      kind: 'report',
      concurrency: 1,
      payload: z.object({ n: z.number() }),
      handler: () => track('report', undefined, turn),
    });
    await createEnqueuer({ schema: t.schema }).enqueueMany(t.db, [
      ...Array.from({ length: 90 }, (_, n) => sync.with({ tenant: `t${n % 3}`, n })),
      ...Array.from({ length: 20 }, (_, n) => report.with({ n })),
    ]);
    const left = async () =>
      (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state in ('queued', 'running')`))
        .rows[0].n as number;
    const connections = Array.from({ length: 6 }, () => openDb({ max: 2 }));
    try {
      await Promise.all(
        connections.map(async (db) => {
          const worker = createWorker({
            db,
            schema: t.schema,
            jobs: [sync, report],
            logger: silentLogger,
            concurrency: 5,
          });
          while ((await left()) > 0) {
            const summary = await worker.runInvocation({ remainingMs: 60_000 });
            if (summary.stoppedBecause === 'error') throw new Error(summary.error);
            if (summary.claimed === 0) await turn();
          }
        }),
      );
    } finally {
      await Promise.all(connections.map((c) => c.close()));
    }
    expect(breaches).toEqual([]);
    expect(peak.queue).toBeGreaterThan(1);
    const { rows } = await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state`);
    expect(rows).toEqual([{ state: 'completed', n: 110 }]);
  });

  it('refuses bad limits in code with a ConfigError naming them', () => {
    expect(() => defineQueue({ name: 'q', concurrency: 0 })).toThrow(ConfigError);
    expect(() => defineQueue({ name: 'q', keyConcurrency: 1.5 })).toThrow(/keyConcurrency must be an integer/);
    expect(() => defineJob({ kind: 'k', payload: z.object({}), concurrency: -1 })).toThrow(/k: concurrency/);
    const a = defineJob({ kind: 'a', queue: defineQueue({ name: 'shared', concurrency: 2 }), payload: z.object({}) });
    const b = defineJob({ kind: 'b', queue: defineQueue({ name: 'shared', concurrency: 3 }), payload: z.object({}) });
    expect(() =>
      createWorker({ db: t.db, schema: t.schema, jobs: [a, b], handlers: { a: () => {}, b: () => {} } }),
    ).toThrow(/queue shared is defined twice with different limits/);
  });
});
