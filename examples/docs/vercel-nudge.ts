// Nudge a Vercel worker route from your own code, after your own transaction committed.
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, serial } from 'drizzle-orm/pg-core';
import { deliverWebhook } from './jobs.js';

const orders = pgTable('orders', { id: serial('id').primaryKey(), total: integer('total').notNull() });
const db = drizzle(process.env.DATABASE_URL!);

// #region vercel-nudge
import { getCache, waitUntil } from '@vercel/functions';
import { createEnqueuer } from 'skiplock';
import { createVercelNudger, vercelRuntimeCache } from 'skiplock/vercel';

// Module scope: one nudger per instance, so a burst of requests coalesces into few starts.
const nudger = createVercelNudger(
  { reports: '/api/reports-worker', '*': '/api/worker' }, // queue → worker route
  {
    // origin (unset): SKIPLOCK_BASE_URL, else the production domain in production, else this
    // deployment's own URL (a preview's), else http://localhost:$PORT under next dev / next start.
    secret: process.env.CRON_SECRET,
    waitUntil,
    // Every enqueue, nudged or not, marks the idle ticks' hint stale (a Next.js app imports the one
    // functions/idle-hints.ts exports).
    idleHints: vercelRuntimeCache({ getCache }),
  },
);
const { enqueue, nudge } = createEnqueuer({ nudger });

export async function POST(request: Request): Promise<Response> {
  const { total } = (await request.json()) as { total: number };
  await db.transaction(async (tx) => {
    const [order] = await tx.insert(orders).values({ total }).returning();
    await enqueue(tx, deliverWebhook, {
      url: 'https://partner.example/hooks',
      eventId: `order-${order!.id}`,
      body: {},
    });
  });
  await nudge([deliverWebhook.queue]); // returns at once; the start's request runs on with waitUntil
  return Response.json({ ok: true });
}
// #endregion vercel-nudge
