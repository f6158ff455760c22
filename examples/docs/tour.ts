// The README's five-minute tour: a kind, and an enqueue in the application's own transaction.
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';

const users = pgTable('users', { id: serial('id').primaryKey(), email: text('email').notNull() });
const db = drizzle(process.env.DATABASE_URL!);
declare const mailer: {
  send(mail: { to: string; template: string; idempotencyKey: string }, options: { signal: AbortSignal }): Promise<void>;
};

// #region tour-define
import { defineJob } from 'skiplock';
import { z } from 'zod';

export const sendWelcomeEmail = defineJob({
  kind: 'send-welcome-email',
  queue: 'emails',
  payload: z.object({ userId: z.number().int(), email: z.email() }),
  maxAttempts: 5,
  timeoutMs: 10_000,
  handler: async ({ userId, email }, ctx) => {
    // A key derived from the job: a re-run after a lost lease sends nothing twice.
    await mailer.send({ to: email, template: 'welcome', idempotencyKey: `welcome-${userId}` }, { signal: ctx.signal });
  },
});

// #endregion tour-define

// #region tour-enqueue
import { enqueue } from 'skiplock';

await db.transaction(async (tx) => {
  const [user] = await tx.insert(users).values({ email: 'ada@example.com' }).returning();
  await enqueue(tx, sendWelcomeEmail, { userId: user!.id, email: user!.email });
}); // the job exists only if the user row commits

// #endregion tour-enqueue

// #region tour-schedule
import { connect, createWorker, defineSchedule } from 'skiplock';

// A digest every Monday at 09:00 New York time: the worker's tick enqueues each occurrence once.
const weeklyDigest = defineSchedule({
  name: 'weekly-digest',
  cron: '0 9 * * 1',
  timezone: 'America/New_York',
  job: sendWelcomeEmail,
  payload: { userId: 0, email: 'digest@example.com' },
});
export const worker = createWorker({
  db: connect({ connectionString: process.env.DATABASE_URL! }),
  jobs: [sendWelcomeEmail],
  schedules: [weeklyDigest],
});
// #endregion tour-schedule
