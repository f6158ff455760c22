import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, listSubscriptions, subscribe } from '../../core/events.js';
import { explain } from '../../core/explain.js';
import { defineJob, JobRegistry } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
let q: ReturnType<typeof createEnqueuer>;
useTestSchema('core-events', (ctx) => {
  t = ctx;
  q = createEnqueuer({ schema: ctx.schema });
});

const orderPlaced = defineEvent({
  name: 'order.placed',
  schema: z.object({ orderId: z.string(), total: z.number(), customer: z.object({ email: z.string() }) }),
});
const order = { orderId: 'o-1', total: 120, customer: { email: 'ada@example.com' } };

const run = (jobs: WorkerOptions['jobs'], now?: Date) =>
  createWorker({
    db: t.db,
    schema: t.schema,
    jobs,
    logger: silentLogger,
    ...(now ? { test: { now: () => now } } : {}),
  }).runInvocation({
    remainingMs: 60_000,
  });
const states = async () =>
  (await t.admin.query(`select kind, state, attempt, dead_reason from "${t.schema}".jobs order by kind`)).rows;

describe(`subscribers run by the worker (${testDriver()})`, () => {
  it("a worker writes its subscribers' subscriptions; map turns the event into the handler's input", async () => {
    const mailed: unknown[] = [];
    const receipt = subscribe(orderPlaced, {
      kind: 'send-receipt',
      map: (p) => ({ to: p.customer.email, subject: `Order ${p.orderId}` }),
      input: z.object({ to: z.string().email(), subject: z.string() }),
      handler: (input) => void mailed.push(input),
    });
    // No sync: the worker's first invocation writes the subscription.
    expect(await run([receipt])).toMatchObject({ claimed: 0 });
    expect((await listSubscriptions(t.db, { schema: t.schema })).map((s) => [s.kind, s.event])).toEqual([
      ['send-receipt', 'order.placed'],
    ]);
    const published = await q.publish(t.db, orderPlaced, order);
    expect(published.jobs.map((j) => j.kind)).toEqual(['send-receipt']);
    expect(await run([receipt])).toMatchObject({ completed: 1 });
    expect(mailed).toEqual([{ to: 'ada@example.com', subject: 'Order o-1' }]);
    // `jobs why` names the event and the subscription the job came from.
    const why = await explain(t.db, published.jobs[0]?.id as string, { schema: t.schema });
    expect(why?.origin).toMatchObject({
      eventId: published.eventId,
      name: 'order.placed',
      subscription: 'send-receipt',
    });
  });

  it("one subscriber's retries and DLQ do not touch the others' jobs", async () => {
    const ok: string[] = [];
    const ship = subscribe(orderPlaced, { kind: 'ship', handler: (p) => void ok.push(p.orderId) });
    const flaky = subscribe(orderPlaced, {
      kind: 'flaky-crm',
      maxAttempts: 2,
      backoff: { type: 'constant', delayMs: 1_000, jitter: 0 },
      handler: () => {
        throw new Error('crm down');
      },
    });
    const broken = subscribe(orderPlaced, {
      kind: 'broken-map',
      map: () => ({ nope: true }),
      input: z.object({ to: z.string() }),
      handler: () => undefined,
    });
    const kinds = [ship, flaky, broken];
    await run(kinds);
    await q.publish(t.db, orderPlaced, order);
    await run(kinds);
    expect(await states()).toEqual([
      { kind: 'broken-map', state: 'dead', attempt: 1, dead_reason: 'validation_error' },
      { kind: 'flaky-crm', state: 'queued', attempt: 1, dead_reason: null },
      { kind: 'ship', state: 'completed', attempt: 1, dead_reason: null },
    ]);
    await run(kinds, new Date(Date.now() + 60_000));
    expect(await states()).toEqual([
      { kind: 'broken-map', state: 'dead', attempt: 1, dead_reason: 'validation_error' },
      { kind: 'flaky-crm', state: 'dead', attempt: 2, dead_reason: 'max_attempts' },
      { kind: 'ship', state: 'completed', attempt: 1, dead_reason: null },
    ]);
    expect(ok).toEqual(['o-1']);
  });

  it('a subscriber is a kind like any other: in a registry, enqueued by hand with the same keys', async () => {
    const keyed = subscribe(orderPlaced, { kind: 'keyed', orderingKey: 'orderId', handler: () => undefined });
    const plain = defineJob({ kind: 'plain', payload: z.object({}) });
    const registry = new JobRegistry([keyed, plain]);
    expect(registry.kinds()).toEqual(['keyed', 'plain']);
    const { id } = await q.enqueue(t.db, keyed, order);
    const row = (await t.admin.query(`select ordering_key from "${t.schema}".jobs where id = $1`, [id])).rows[0];
    expect(row.ordering_key).toBe('o-1');
    expect(() => subscribe(orderPlaced, { kind: 'bad', orderingKey: '' })).toThrow(/payload path/);
  });
});
