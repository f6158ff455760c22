// A signup's transaction whose COMMIT lost its answer: the driver's own error, read with
// toSkiplockError, and a resend that is safe because both writes are.

import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, text } from 'drizzle-orm/pg-core';
import { defineJob } from 'skiplock';
import { z } from 'zod';

const users = pgTable('users', { id: text('id').primaryKey(), email: text('email').notNull() });
const db = drizzle(process.env.DATABASE_URL!);
const sendWelcome = defineJob({ kind: 'send-welcome', payload: z.object({ userId: z.string() }) });
declare const user: { id: string; email: string };

// #region lost-commit
import { createEnqueuer, toSkiplockError } from 'skiplock';

const { enqueue } = createEnqueuer();
const once = { key: `welcome:${user.id}`, mode: 'window' as const, windowMs: 1_000 * 365 * 86_400_000 };

try {
  await db.transaction(async (tx) => {
    await tx.insert(users).values(user).onConflictDoNothing(); // your write, safe to repeat
    await enqueue(tx, sendWelcome, { userId: user.id }, { dedupe: once });
  });
} catch (err) {
  if (toSkiplockError(err).code !== 'outcome_unknown') throw err;
  // It may have committed: send it again — the key returns the first job, the upsert changes nothing.
}
// #endregion lost-commit
