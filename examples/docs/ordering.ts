// Ordering keys: the events of one order run one at a time, in enqueue order (docs/kinds-and-enqueue.md#ordering-keys).
import { connect, createEnqueuer } from 'skiplock';

const db = connect({ connectionString: process.env.DATABASE_URL! });
declare const partner: { post(event: unknown, options: { signal: AbortSignal }): Promise<void> };

// #region ordering
import { defineJob } from 'skiplock';
import { z } from 'zod';

export const orderEvent = defineJob({
  kind: 'order-event',
  queue: 'webhooks',
  payload: z.object({ orderId: z.string(), event: z.enum(['created', 'paid', 'shipped']) }),
  orderingKey: (p) => `order-${p.orderId}`, // one job per order at a time, in enqueue order
  orderingOnDead: 'continue', // the default; 'hold' keeps the order's later events until a replay
  handler: async (event, ctx) => partner.post(event, { signal: ctx.signal }),
});

const enqueuer = createEnqueuer();
await enqueuer.enqueue(db, orderEvent, { orderId: '42', event: 'created' });
await enqueuer.enqueue(db, orderEvent, { orderId: '42', event: 'paid' }); // waits for 'created'
// Or per call, for any kind: enqueue(db, kind, payload, { orderingKey: 'tenant-7' })
// #endregion ordering
