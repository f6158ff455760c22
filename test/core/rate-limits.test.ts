import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { WatchingClock } from '../helpers/supplied-clock.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-rates', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

function rateWorker(options: Partial<WorkerOptions> = {}) {
  const clock = new WatchingClock();
  const ran: number[] = [];
  // Three starts a minute: the test's real seconds never give a token back; it does, by moving
  // the recorded starts a period into the past. (A start is recorded rounded up to 1/100 of the
  // period: the wait for a token is up to 600 ms longer than a minute.)
  const call = defineJob({
    kind: 'call-partner',
    queue: defineQueue({ name: 'partner', rateLimit: { limit: 3, periodMs: 60_000 } }),
    payload: z.object({ n: z.number() }),
    timeoutMs: 1_000,
    handler: ({ n }) => void ran.push(n),
  });
  const worker = createWorker({ db: t.db, schema: t.schema, jobs: [call], clock, logger: silentLogger, ...options });
  return { clock, ran, call, worker };
}

const ageStarts = () =>
  t.admin.query(
    `update "${t.schema}".rate_buckets set starts = (select array_agg(x - interval '61 seconds') from unnest(starts) x)`,
  );
const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

describe(`rate limits in the worker (${testDriver()})`, () => {
  it('waits for the next token when a rate is all that holds the work back, then starts the next jobs', async () => {
    const w = rateWorker({ rateWaitMs: 90_000 });
    await q.enqueueMany(
      t.db,
      Array.from({ length: 6 }, (_, n) => w.call.with({ n })),
    );
    const firstWait = w.clock.nextTimer(50_000, 61_000);
    const run = w.worker.runInvocation({ remainingMs: 600_000 });
    const ms = await firstWait;
    // Three ran (their outcomes written before the wait), three wait for the rate.
    expect(w.ran).toEqual([0, 1, 2]);
    expect(await states()).toEqual([
      { state: 'completed', n: 3 },
      { state: 'queued', n: 3 },
    ]);
    await ageStarts(); // a period passes, as far as the database can tell
    const secondWait = w.clock.nextTimer(50_000, 61_000);
    w.clock.advance(ms);
    // The next three ran; the rate is used up again and the queue is empty: one more look after the
    // next token, and it stops.
    w.clock.advance(await secondWait);
    const summary = await run;
    expect(w.ran).toEqual([0, 1, 2, 3, 4, 5]);
    expect(summary).toMatchObject({ claimed: 6, completed: 6, stoppedBecause: 'drained' });
    expect(summary.rateWaitMs).toBeGreaterThan(100_000);
  });

  it('returns drained when the next token is further than rateWaitMs (default 10 s) or past the time to stop claiming', async () => {
    const w = rateWorker();
    await q.enqueueMany(
      t.db,
      Array.from({ length: 6 }, (_, n) => w.call.with({ n })),
    );
    const first = await w.worker.runInvocation({ remainingMs: 600_000 });
    expect(first).toMatchObject({ completed: 3, stoppedBecause: 'drained' });
    expect(first.rateWaitMs).toBeUndefined();
    await ageStarts();
    const short = rateWorker({ rateWaitMs: 90_000 });
    const second = await short.worker.runInvocation({ remainingMs: 30_000 });
    expect(second).toMatchObject({ completed: 3, stoppedBecause: 'drained' });
    expect(second.rateWaitMs).toBeUndefined();
  });

  it("a worker's destinationRateLimits hold its destinations, '*' each one", async () => {
    const ran: string[] = [];
    const hook = defineJob({
      kind: 'hook',
      payload: z.object({ url: z.string() }),
      destination: (p) => new URL(p.url).host,
      handler: (p) => void ran.push(new URL(p.url).host),
    });
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 5 }, () => hook.with({ url: 'https://slow.example/h' })),
      ...Array.from({ length: 5 }, () => hook.with({ url: 'https://a.example/h' })),
    ]);
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [hook],
      logger: silentLogger,
      destinationRateLimits: { 'slow.example': { limit: 1, periodMs: 60_000 }, '*': { limit: 2, periodMs: 60_000 } },
    });
    expect(await worker.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 3 });
    expect(ran.sort()).toEqual(['a.example', 'a.example', 'slow.example']);
  });

  it('refuses bad rates in kinds, queues and worker options', () => {
    const payload = z.object({});
    expect(() => defineQueue({ name: 'q', rateLimit: { limit: 0 } })).toThrow(ConfigError);
    expect(() => defineQueue({ name: 'q', keyRateLimit: { limit: 5, periodMs: 500 } })).toThrow(
      /keyRateLimit.periodMs must be a whole number of milliseconds from 1000/,
    );
    expect(() => defineJob({ kind: 'k', payload, rateLimit: { limit: 1e6 } })).toThrow(
      /k: rateLimit.limit must be a whole number from 1 to 100000/,
    );
    const k = defineJob({ kind: 'k', payload, handler: () => {} });
    const base = { db: t.db, schema: t.schema, jobs: [k] };
    expect(() => createWorker({ ...base, rateWaitMs: -1 })).toThrow(/rateWaitMs must be a whole number/);
    expect(() => createWorker({ ...base, destinationRateLimits: { 'a.example': { limit: 'x' as never } } })).toThrow(
      /destinationRateLimits\["a.example"\]: rate.limit/,
    );
    expect(() => createWorker({ ...base, destinationRateLimits: { '': { limit: 1 } } })).toThrow(/1-200 characters/);
    // Two definitions of one queue must agree on their rates too.
    const same = (limit: number) => defineQueue({ name: 'same', rateLimit: { limit } });
    const a = defineJob({ kind: 'a', payload, queue: same(1), handler: () => {} });
    const b = defineJob({ kind: 'b', payload, queue: same(2), handler: () => {} });
    expect(() => createWorker({ db: t.db, schema: t.schema, jobs: [a, b] })).toThrow(/defined twice/);
  });
});
