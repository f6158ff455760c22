/**
 * `npm run example:events`: one event, many reactions. An order is written and `order.placed`
 * published in the same transaction; three subscribers — declared in the code of the functions that
 * react, stored in the database by `sync` — each get a job of their own, in one statement. One of
 * them filters, one maps the event to its own input. A retried publish writes nothing twice, an
 * event no one listens to is kept and flagged, and a subscriber added later is replayed what it
 * missed. Uses DATABASE_URL, or an embedded Postgres.
 */
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import {
  connect,
  createWorker,
  defineEvent,
  getEvent,
  JobRegistry,
  listEvents,
  migrate,
  publish,
  replayEvents,
  silentLogger,
  subscribe,
  syncSubscriptions,
} from 'skiplock';
import { z } from 'zod';
import { resolveDevDatabase } from '../scripts/local-postgres.js';

const sent: string[] = [];

// #region events-define
// events.ts — imported by the function that publishes and by the functions that react.
export const orderPlaced = defineEvent({
  name: 'order.placed',
  schema: z.object({
    orderId: z.string(),
    total: z.number(),
    express: z.boolean(),
    customer: z.object({ email: z.email() }),
  }),
});
// #endregion events-define

// #region events-subscribe
// In the code of the functions that react: each subscriber is a job kind of its own.
const sendReceipt = subscribe(orderPlaced, {
  kind: 'send-receipt',
  queue: 'emails',
  maxAttempts: 5,
  // The worker turns the event into this handler's input, and checks it.
  map: (order) => ({ to: order.customer.email, subject: `Your order ${order.orderId}` }),
  input: z.object({ to: z.email(), subject: z.string() }),
  handler: async ({ to, subject }) => void sent.push(`receipt → ${to}: ${subject}`),
});

const shipExpress = subscribe(orderPlaced, {
  kind: 'ship-express',
  // Checked in the publish statement (jsonb @>): no job at all for an order that is not express.
  where: { express: true },
  orderingKey: 'orderId', // a payload path: one job per order at a time
  handler: async (order) => void sent.push(`express shipping for ${order.orderId}`),
});

const updateLoyalty = subscribe(orderPlaced, {
  kind: 'update-loyalty',
  concurrencyKey: 'customer.email',
  handler: async (order) => void sent.push(`loyalty +${Math.floor(order.total)} for ${order.customer.email}`),
});
// #endregion events-subscribe

const database = await resolveDevDatabase();
const app = drizzle(database.url);
app.$client.on('error', (error) => console.warn('app pool: idle connection closed:', error.message));
const db = connect({ connectionString: database.url });
try {
  await migrate(db);
  await app.execute(sql`create table if not exists example_orders (id text primary key, total numeric not null)`);
  await app.execute(sql`truncate example_orders`);

  // #region events-sync
  // At deploy (`npx skiplock sync --jobs functions/jobs.ts`), and by every worker of these kinds:
  // the subscriptions are stored where the publisher's statement reads them.
  const registry = new JobRegistry([sendReceipt, shipExpress]);
  console.log('sync', await syncSubscriptions(db, registry));
  // #endregion events-sync

  // #region events-publish
  // The order and its event commit together, or neither does. ONE statement writes the event and a
  // job per subscriber; the publisher imports only `orderPlaced`, not its subscribers.
  const order = { orderId: 'A-17', total: 120.5, express: true, customer: { email: 'ada@example.com' } };
  const published = await app.transaction(async (tx) => {
    await tx.execute(sql`insert into example_orders (id, total) values (${order.orderId}, ${order.total})`);
    return publish(tx, orderPlaced, order, { dedupeKey: `order:${order.orderId}` });
  });
  console.log(
    'published',
    published.eventId,
    published.jobs
      .map((j) => j.kind)
      .sort()
      .join(','),
  );

  // A retry of the same publish (an answer lost on the way back) writes nothing twice.
  const retried = await publish(db, orderPlaced, order, { dedupeKey: `order:${order.orderId}` });
  console.log('retried: duplicate', retried.duplicate, 'jobs', retried.jobs.length);
  // #endregion events-publish

  // Not express: send-receipt only.
  await publish(db, orderPlaced, { ...order, orderId: 'A-18', express: false }, { dedupeKey: 'order:A-18' });

  // #region events-unsubscribed
  // No subscriber: the event is kept and flagged (subscribers 0), as a queue no worker serves is.
  const refunded = defineEvent({ name: 'order.refunded', schema: z.object({ orderId: z.string() }) });
  const lonely = await publish(db, refunded, { orderId: 'A-17' });
  console.log('order.refunded subscribers', lonely.subscribers);
  console.log('unsubscribed events', (await listEvents(db, { unsubscribed: true })).map((e) => e.name).join(','));
  // #endregion events-unsubscribed

  const worker = createWorker({ db, jobs: [sendReceipt, shipExpress, updateLoyalty], logger: silentLogger });
  await worker.runInvocation({ remainingMs: 60_000 });

  // #region events-replay
  // update-loyalty is deployed later: its first worker (or sync) stores its subscription, and a
  // replay by time range gives it the events it missed — once, however often it is run.
  await syncSubscriptions(db, new JobRegistry([sendReceipt, shipExpress, updateLoyalty]));
  const from = new Date(Date.now() - 3_600_000);
  const missed = await replayEvents(db, { subscription: 'update-loyalty', from });
  const again = await replayEvents(db, { subscription: 'update-loyalty', from });
  console.log('replayed', missed.length, 'then', again.length);
  // #endregion events-replay
  await worker.runInvocation({ remainingMs: 60_000 });

  // #region events-show
  // The event with each subscriber's job and its state (`skiplock events show <id>`, the console).
  const event = await getEvent(db, published.eventId as string);
  for (const job of event?.jobs ?? []) console.log(`  ${job.subscription}: job ${job.jobId} ${job.state}`);
  // #endregion events-show
  for (const line of sent.sort()) console.log(line);
} finally {
  await db.close();
  await app.$client.end();
  await database.stop();
}
