// Concurrency limits and concurrency keys (docs/kinds-and-enqueue.md#concurrency-limits-and-fair-share).
import { connect, createEnqueuer } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
const partner = { post: async (_body: unknown, _init: { signal: AbortSignal }) => {} };

// #region limits
import { defineJob, defineQueue } from 'skiplock';

// At most 20 webhooks run at once across every invocation, and at most 3 per tenant.
const webhooks = defineQueue({ name: 'webhooks', concurrency: 20, keyConcurrency: 3 });

export const deliver = defineJob({
  kind: 'deliver',
  queue: webhooks,
  payload: z.object({ tenantId: z.string(), url: z.url() }),
  concurrencyKey: (p) => `tenant-${p.tenantId}`, // fair share between tenants, and their limit of 3
  concurrency: 15, // and at most 15 of this kind
  handler: async (p, ctx) => partner.post(p, { signal: ctx.signal }),
});

await createEnqueuer().enqueue(db, deliver, { tenantId: '7', url: 'https://example.com/hook' });

// #endregion limits

// #region limits-runtime
import { clearLimit, limits, setLimit } from 'skiplock';

await setLimit(db, { queue: 'webhooks' }, 5, { by: 'alice', reason: 'partner asked us to slow down' });
await setLimit(db, { queue: 'webhooks', perKey: true }, 1, { by: 'alice' });
console.log(await limits(db)); // [{ scope, name, maxRunning, running, busiestKey, setBy, setAt, reason }]
await clearLimit(db, { queue: 'webhooks' }); // the code's 20 applies again
// #endregion limits-runtime
