// Enqueue inside the application's own transaction (node-postgres here; neon-serverless is the same).
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, serial } from 'drizzle-orm/pg-core';
import { deliverWebhook, sendEmail } from './jobs.js';

const orders = pgTable('orders', { id: serial('id').primaryKey(), total: integer('total').notNull() });
const db = drizzle(process.env.DATABASE_URL!);
declare const requestId: string;
declare const url: string;

// #region enqueue-in-transaction
import { enqueue } from 'skiplock';

await db.transaction(async (tx) => {
  const [order] = await tx.insert(orders).values({ total: 42 }).returning();
  await enqueue(
    tx,
    deliverWebhook,
    { url: 'https://partner.example/hooks', eventId: `order-${order!.id}`, body: { order } },
    { dedupe: { key: `order-${order!.id}` }, correlationId: requestId },
  );
}); // rolled back → the job never existed; committed → claimable

// #endregion enqueue-in-transaction

// #region enqueue-many
import { enqueueMany } from 'skiplock';

// One statement for N jobs, of any kinds; results come back in input order.
const results = await enqueueMany(db, [
  deliverWebhook.with({ url, eventId: 'e1', body: {} }),
  sendEmail.with({ to: 'a@example.com', subject: 'hi' }, { delayMs: 60_000 }),
]);
// → [{ id: '17', outcome: 'inserted' }, { id: '18', outcome: 'inserted' }]
// #endregion enqueue-many
console.log(results);
