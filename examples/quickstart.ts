/**
 * `npm run example`: define a kind, enqueue it in the same transaction as a business write,
 * run one worker invocation, look at the result. Uses DATABASE_URL, or an embedded Postgres.
 */
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import { connect, createWorker, DiscardError, defineJob, enqueue, getJob, migrate } from 'skiplock';
import { z } from 'zod';
import { resolveDevDatabase } from '../scripts/local-postgres.js';

// The application's own table and Drizzle database.
const users = pgTable('example_users', { id: serial('id').primaryKey(), email: text('email').notNull() });

// 1. Define a kind once: its payload schema, queue, retries, timeout, handler.
const sendWelcomeEmail = defineJob({
  kind: 'send-welcome-email',
  queue: 'emails',
  payload: z.object({ userId: z.number().int(), email: z.email() }),
  maxAttempts: 5,
  timeoutMs: 10_000,
  backoff: { type: 'exponential', baseMs: 2_000, maxMs: 600_000 },
  handler: async (payload, ctx) => {
    // Idempotent by design: the provider call carries a key derived from the job, so a
    // re-run after a lost lease does not send a second e-mail.
    const idempotencyKey = `welcome-${payload.userId}`;
    if (payload.email.endsWith('@invalid.test')) {
      throw new DiscardError('mailbox does not exist', { reason: 'http_4xx', response: { status: 422 } });
    }
    ctx.logger.info('sent welcome e-mail', { to: payload.email, idempotencyKey, attempt: ctx.attempt });
  },
});

const database = await resolveDevDatabase();
const app = drizzle(database.url);
// node-postgres: when the server closes an idle pooled connection (restart, failover, or this
// script stopping its embedded Postgres while the pool is still saying goodbye), the pool
// emits 'error'; with no listener Node exits. Log it: the pool drops that client by itself.
app.$client.on('error', (error) => console.warn('app pool: idle connection closed:', error.message));
const db = connect({ connectionString: database.url }); // skiplock's own connection, for the worker
try {
  await migrate(db); // creates the skiplock schema; a no-op when it is up to date
  await app.execute(sql`create table if not exists example_users (id serial primary key, email text not null)`);

  // 2. Enqueue inside the caller's transaction: the job exists only if the user row commits.
  const job = await app.transaction(async (tx) => {
    const [user] = await tx.insert(users).values({ email: 'ada@example.com' }).returning();
    return enqueue(
      tx,
      sendWelcomeEmail,
      { userId: user!.id, email: user!.email },
      { dedupe: { key: `welcome-${user!.id}` } },
    );
  });
  console.log('enqueued', job);

  // 3. One worker invocation: claims what fits in the time budget, runs it, writes outcomes.
  //    It logs one JSON line per job outcome and one for the invocation summary.
  const worker = createWorker({ db, jobs: [sendWelcomeEmail] });
  await worker.runInvocation({ remainingMs: 30_000 });
  console.log('job', job.id, 'is now', (await getJob(db, job.id))?.state);
} finally {
  await db.close();
  await app.$client.end();
  await database.stop();
}
