// Publishing on each driver: a Drizzle transaction (pg, neon-ws), any client through queryExecutor,
// and the caller's db.batch on neon-http (no interactive transactions).
import { drizzle } from 'drizzle-orm/neon-http';
import { integer, pgTable, serial } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import { defineEvent } from 'skiplock';
import { z } from 'zod';

const orders = pgTable('orders', { id: serial('id').primaryKey(), total: integer('total').notNull() });
const db = drizzle(process.env.DATABASE_URL!);
declare const pool: pg.Pool;
const orderPlaced = defineEvent({ name: 'order.placed', schema: z.object({ orderId: z.string(), total: z.number() }) });
const order = { orderId: 'A-17', total: 120 };

// #region events-pg-client
import { publish, queryExecutor } from 'skiplock';

const client = await pool.connect();
try {
  await client.query('begin');
  await client.query('insert into orders (id, total) values ($1, $2)', [order.orderId, order.total]);
  await publish(
    queryExecutor((text, params) => client.query(text, params)),
    orderPlaced,
    order,
  );
  await client.query('commit');
} catch (err) {
  await client.query('rollback');
  throw err;
} finally {
  client.release();
}

// #endregion events-pg-client

// #region events-neon-http
import { createEnqueuer } from 'skiplock';

const { preparePublish, nudge } = createEnqueuer();

const pending = preparePublish(orderPlaced, order, { dedupeKey: `order:${order.orderId}` });
const [, raw] = await db.batch([db.insert(orders).values({ total: order.total }), db.execute(pending.statements[0]!)]);
const published = pending.read([raw]); // { eventId, duplicate, subscribers, jobs }
await nudge(published.jobs.map((j) => j.queue)); // after the batch committed (needs a nudger)
// #endregion events-neon-http
