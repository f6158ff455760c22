import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DestinationError, DiscardError, InvalidOptionsError, RetryError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import type { Logger } from '../../core/logger.js';
import { setRateLimit } from '../../core/rate-limits.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('core-destinations', (ctx) => {
  t = ctx;
});

/** A logger that keeps the breaker lines. */
function breakerLog() {
  const lines: Record<string, unknown>[] = [];
  const keep = (msg: string, fields?: Record<string, unknown>) => {
    if (msg === 'breaker') lines.push(fields ?? {});
  };
  const logger: Logger = { debug: () => {}, info: keep, warn: keep, error: keep, isEnabled: () => true };
  return { logger, lines };
}

const statesOf = async (where: string) =>
  (
    await t.admin.query(
      `select state, attempt, count(*)::int as n from "${t.schema}".jobs where ${where} group by state, attempt order by state, attempt`,
    )
  ).rows;

describe(`destinations and their breakers in the worker (${testDriver()})`, () => {
  it("5xx answers open the destination's breaker: its other jobs wait without an attempt, other destinations run on", async () => {
    const calls = new Map<string, number>();
    const webhook = defineJob({
      kind: 'webhook',
      payload: z.object({ url: z.string(), n: z.number() }),
      destination: (p) => new URL(p.url).host,
      maxAttempts: 10,
      backoff: { type: 'constant', delayMs: 0 },
      handler: async (p) => {
        const host = new URL(p.url).host;
        calls.set(host, (calls.get(host) ?? 0) + 1);
        if (host === 'down.example') {
          throw new RetryError('receiver answered 503', { response: { status: 503, body: 'unavailable' } });
        }
      },
    });
    await createEnqueuer({ schema: t.schema }).enqueueMany(t.db, [
      ...Array.from({ length: 20 }, (_, n) => webhook.with({ url: `https://down.example/hook/${n}`, n })),
      ...Array.from({ length: 20 }, (_, n) => webhook.with({ url: `https://up.example/hook/${n}`, n })),
    ]);
    const { logger, lines } = breakerLog();
    // Batches of one: each outcome is written before the next claim.
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [webhook], concurrency: 1, batchSize: 1, logger });
    const summary = await worker.runInvocation({ remainingMs: 60_000 });
    // Five failed attempts, then nothing more for it: the breaker is open for 30 s.
    expect(calls.get('down.example')).toBe(5);
    expect(calls.get('up.example')).toBe(20);
    expect(summary.breakers).toEqual([{ destination: 'down.example', from: 'closed', to: 'open' }]);
    expect(lines).toEqual([
      expect.objectContaining({ destination: 'down.example', from: 'closed', to: 'open', failures: 5, calls: 5 }),
    ]);
    expect(await statesOf(`destination = 'down.example'`)).toEqual([
      { state: 'queued', attempt: 0, n: 15 },
      { state: 'queued', attempt: 1, n: 5 },
    ]);
    expect(await statesOf(`destination = 'up.example'`)).toEqual([{ state: 'completed', attempt: 1, n: 20 }]);
  });

  it('a 4xx discard and a bug in the handler do not count against the destination; timeouts and DestinationError do', async () => {
    const kind = (name: string, handler: () => Promise<void>, timeoutMs = 5_000) =>
      defineJob({
        kind: name,
        payload: z.object({ n: z.number() }),
        destination: () => `${name}.example`,
        maxAttempts: 1,
        timeoutMs,
        handler,
      });
    const rejected = kind('rejected', async () => {
      throw new DiscardError('rejected with 404', { response: { status: 404 } });
    });
    const buggy = kind('buggy', async () => {
      throw new TypeError("Cannot read properties of undefined (reading 'x')");
    });
    // Never settles; its 50 ms timeout ends the attempt.
    const hanging = kind('hanging', () => new Promise<void>(() => {}), 50);
    const flagged = kind('flagged', async () => {
      throw new DestinationError('partner in maintenance (200 with an error page)');
    });
    const kinds = [rejected, buggy, hanging, flagged];
    await createEnqueuer({ schema: t.schema }).enqueueMany(
      t.db,
      kinds.flatMap((k) => Array.from({ length: 5 }, (_, n) => k.with({ n }))),
    );
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: kinds,
      concurrency: 5,
      batchSize: 5,
      logger: breakerLog().logger,
    });
    while ((await worker.runInvocation({ remainingMs: 60_000 })).claimed > 0);
    const rows = await t.admin.query(
      `select name, state, window_failures, window_calls from "${t.schema}".destinations order by name`,
    );
    expect(rows.rows).toEqual([
      { name: 'buggy.example', state: 'closed', window_failures: 0, window_calls: 5 },
      { name: 'flagged.example', state: 'open', window_failures: 5, window_calls: 5 },
      { name: 'hanging.example', state: 'open', window_failures: 5, window_calls: 5 },
      { name: 'rejected.example', state: 'closed', window_failures: 0, window_calls: 5 },
    ]);
  });

  it('half-open with a run-time rate and a kind limit: the probe runs, then the breaker closes and the rest runs', async () => {
    // The repro: any run-time rate (on a queue nothing here uses), kind X limited to one at a time.
    await setRateLimit(t.db, { queue: 'elsewhere' }, { limit: 10, periodMs: 1_000 }, { schema: t.schema, by: 'test' });
    const breaker = { failures: 2, coolDownMs: 1_000 };
    const ran: string[] = [];
    const a = defineJob({
      kind: 'a',
      payload: z.object({ n: z.number() }),
      destination: () => 'd.example',
      breaker,
      maxAttempts: 1,
      handler: async () => {
        throw new DestinationError('partner down');
      },
    });
    const b = defineJob({
      kind: 'b',
      payload: z.object({ n: z.number() }),
      destination: () => 'd.example',
      breaker,
      handler: async (p) => {
        ran.push(`b${p.n}`);
      },
    });
    const x = defineJob({
      kind: 'x',
      payload: z.object({ n: z.number() }),
      concurrency: 1,
      handler: async (p) => {
        ran.push(`x${p.n}`);
      },
    });
    const enqueuer = createEnqueuer({ schema: t.schema });
    await enqueuer.enqueueMany(t.db, [a.with({ n: 1 }), a.with({ n: 2 })]);
    const quiet = breakerLog().logger;
    await createWorker({ db: t.db, schema: t.schema, jobs: [a], logger: quiet }).runInvocation({ remainingMs: 60_000 });
    // The cool-down's second passes: the breaker's stored times move one second back (no sleep).
    const opened = await t.admin.query(
      `update "${t.schema}".destinations set opened_at = opened_at - interval '1 second',
        open_until = open_until - interval '1 second' where name = 'd.example' and state = 'open' returning name`,
    );
    expect(opened.rowCount).toBe(1);
    const [b1] = await enqueuer.enqueueMany(t.db, [b.with({ n: 1 }), b.with({ n: 2 }), x.with({ n: 1 })]);
    // A fresh worker: its first claim is the limited one (kind X declares a limit), and a rate applies.
    const { logger, lines } = breakerLog();
    const summary = await createWorker({ db: t.db, schema: t.schema, jobs: [b, x], logger }).runInvocation({
      remainingMs: 60_000,
    });
    expect(ran.sort()).toEqual(['b1', 'b2', 'x1']);
    expect(summary.breakers).toEqual([
      { destination: 'd.example', from: 'open', to: 'half_open' },
      { destination: 'd.example', from: 'half_open', to: 'closed' },
    ]);
    // The probe the log names is the job that ran first: B's first.
    expect(lines.map((l) => [l.from, l.to, l.probeJobId])).toEqual([
      ['open', 'half_open', b1?.id],
      ['half_open', 'closed', undefined],
    ]);
    expect(await statesOf(`kind in ('b', 'x')`)).toEqual([{ state: 'completed', attempt: 1, n: 3 }]);
  });

  it('bad destinations and breaker settings are refused with a clear error, and nothing is written', async () => {
    const kind = defineJob({ kind: 'k', payload: z.object({ host: z.string() }), destination: (p) => p.host });
    const enqueuer = createEnqueuer({ schema: t.schema });
    await expect(enqueuer.enqueue(t.db, kind, { host: '' })).rejects.toThrow(
      /destination\(payload\) must return a string of 1-200 characters/,
    );
    await expect(enqueuer.enqueue(t.db, kind, { host: 'x' }, { destination: 'y'.repeat(201) })).rejects.toThrow(
      InvalidOptionsError,
    );
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0].n).toBe(0);
    expect(() => defineJob({ kind: 'b', payload: z.object({}), breaker: { failures: 0 } })).toThrow(
      /breaker.failures must be a whole number ≥ 1/,
    );
    expect(() =>
      createWorker({
        db: t.db,
        jobs: [kind],
        handlers: { k: async () => {} },
        breakers: { 'a.example': { failureRate: 2 } },
      }),
    ).toThrow(/breaker.failureRate must be in \(0, 1\]/);
  });
});
