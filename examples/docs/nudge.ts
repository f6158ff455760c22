// Start a worker right after the jobs committed (Lambda): a nudger, then nudge after the commit.
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, serial } from 'drizzle-orm/pg-core';
import { deliverWebhook, sendEmail } from './jobs.js';

const orders = pgTable('orders', { id: serial('id').primaryKey(), total: integer('total').notNull() });
const db = drizzle(process.env.DATABASE_URL!);

// #region nudge
import { createEnqueuer } from 'skiplock';
import { createLambdaNudger } from 'skiplock/lambda';

// Which worker function runs each queue (your serverless.yml's names); needs lambda:InvokeFunction.
const nudger = createLambdaNudger({ webhooks: 'my-app-prod-worker', '*': 'my-app-prod-worker' });
const { enqueue, nudge } = createEnqueuer({ nudger });

// In a transaction: the job is claimable only after the commit, so nudge after it.
await db.transaction(async (tx) => {
  const [order] = await tx.insert(orders).values({ total: 42 }).returning();
  await enqueue(tx, deliverWebhook, { url: 'https://partner.example/hooks', eventId: `order-${order!.id}`, body: {} });
});
await nudge([deliverWebhook.queue]);

// Outside a transaction the call commits by itself: ask for the nudge in the options.
await enqueue(db, sendEmail, { to: 'ada@example.com', subject: 'Welcome' }, { nudge: true });
// #endregion nudge
