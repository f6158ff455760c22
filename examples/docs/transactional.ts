// A transactional kind: the handler's writes commit together with the job's completion.
import { pgTable, serial, text, timestamp } from 'drizzle-orm/pg-core';

const invoices = pgTable('invoices', {
  id: serial('id').primaryKey(),
  orderId: text('order_id').notNull().unique(),
  issuedAt: timestamp('issued_at', { withTimezone: true }).notNull(),
});

// #region transactional
import { defineJob } from 'skiplock';
import { z } from 'zod';

export const issueInvoice = defineJob({
  kind: 'issue-invoice',
  payload: z.object({ orderId: z.string() }),
  transactional: true, // pg and neon-ws only
  handler: async ({ orderId }, ctx) => {
    // Committed exactly when the job completes; rolled back when it fails.
    await ctx.tx.insert(invoices).values({ orderId, issuedAt: new Date() }).onConflictDoNothing();
  },
});
// #endregion transactional
