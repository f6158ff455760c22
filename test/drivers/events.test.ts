import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OutcomeUnknownError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, type PublishResult, subscribe, syncSubscriptions } from '../../core/events.js';
import { JobRegistry } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { testDriver } from '../helpers/db.js';
import { type FaultyContext, useFaultySchema } from '../helpers/faulty.js';

// The driver smoke set for events: a publish with the caller's business write (a transaction on pg
// and neon-ws, the caller's batch on neon-http), the subscribers' jobs run by a worker through the
// same driver, and a publish whose answer is lost after COMMIT, retried with its dedupe key.
let t: FaultyContext;
useFaultySchema('drivers-events', (ctx) => {
  t = ctx;
});

const ran: string[] = [];
const placed = defineEvent({ name: 'order.placed', schema: z.object({ orderId: z.number() }) });
const kinds = [
  subscribe(placed, { kind: 'ship', timeoutMs: 2_000, handler: (p) => void ran.push(`ship ${p.orderId}`) }),
  subscribe(placed, {
    kind: 'bill',
    timeoutMs: 2_000,
    map: (p) => ({ invoice: `inv-${p.orderId}` }),
    handler: (p) => void ran.push(`bill ${p.invoice}`),
  }),
];
const count = async (table: string) =>
  Number((await t.admin.query(`select count(*)::int as n from "${t.schema}".${table}`)).rows[0].n);

describe(`publish on ${testDriver()}`, () => {
  it("with the caller's business write, then the worker runs each subscriber's job", async () => {
    await t.admin.query(`create table if not exists "${t.schema}".orders (id int primary key)`);
    await t.admin.query(`truncate "${t.schema}".orders, "${t.schema}".events, "${t.schema}".event_deliveries`);
    await syncSubscriptions(t.db, new JobRegistry(kinds), { schema: t.schema });
    const q = createEnqueuer({ schema: t.schema });
    const orders = sql`${sql.identifier(t.schema)}.orders`;
    let result: PublishResult;
    if (testDriver() === 'neon-http') {
      const db = t.db.db as unknown as NeonHttpDatabase;
      const p = q.preparePublish(placed, { orderId: 1 });
      const [, raw] = (await db.batch([
        db.execute(sql`insert into ${orders} (id) values (1)`),
        db.execute(p.statements[0] as never),
      ] as never)) as unknown[];
      result = p.read([raw]);
    } else {
      result = await t.db.db.transaction(async (tx) => {
        await tx.execute(sql`insert into ${orders} (id) values (1)`);
        return q.publish(tx, placed, { orderId: 1 });
      });
    }
    expect(result.jobs.map((j) => j.kind).sort()).toEqual(['bill', 'ship']);
    expect(await count('orders')).toBe(1);
    ran.length = 0;
    const summary = await createWorker({ db: t.db, schema: t.schema, jobs: kinds, logger: silentLogger }).runInvocation(
      {
        remainingMs: 30_000,
      },
    );
    expect(summary).toMatchObject({ completed: 2 });
    expect(ran.sort()).toEqual(['bill inv-1', 'ship 1']);
  });

  it('whose answer is lost after COMMIT: OutcomeUnknownError; the retry with its dedupe key writes nothing twice', async () => {
    await t.admin.query(`truncate "${t.schema}".events, "${t.schema}".event_deliveries, "${t.schema}".jobs`);
    await syncSubscriptions(t.db, new JobRegistry(kinds), { schema: t.schema });
    const q = createEnqueuer({ schema: t.schema });
    t.faults.inject({ mode: 'lose-answer', match: 'insert into' });
    await expect(q.publish(t.db, placed, { orderId: 7 }, { dedupeKey: 'order-7' })).rejects.toBeInstanceOf(
      OutcomeUnknownError,
    );
    const retry = await q.publish(t.db, placed, { orderId: 7 }, { dedupeKey: 'order-7' });
    const [first] = (await t.admin.query(`select id::text as id from "${t.schema}".events`)).rows;
    expect(retry).toEqual({ eventId: first.id, duplicate: true, subscribers: 2, jobs: [] });
    expect([await count('events'), await count('jobs'), await count('event_deliveries')]).toEqual([1, 2, 2]);
  });
});
