// neon-http has no interactive transactions: the enqueue rides in the caller's db.batch (one transaction).
import { drizzle } from 'drizzle-orm/neon-http';
import { integer, pgTable, serial } from 'drizzle-orm/pg-core';
import { deliverWebhook } from './jobs.js';

const orders = pgTable('orders', { id: serial('id').primaryKey(), total: integer('total').notNull() });
const db = drizzle(process.env.DATABASE_URL!);
declare const order: { total: number };
declare const payload: { url: string; eventId: string; body: Record<string, unknown> };

// #region neon-http-batch
import { createEnqueuer } from 'skiplock';

const { prepareEnqueue } = createEnqueuer();

const pending = prepareEnqueue([deliverWebhook.with(payload)]);
const [, ...raw] = await db.batch([db.insert(orders).values(order), ...pending.statements.map((s) => db.execute(s))]);
const [result] = pending.read(raw); // { id, outcome }; id is null for a dedupe holder the batch could not see
// #endregion neon-http-batch
console.log(result);
