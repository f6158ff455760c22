// Rate limits (docs/rate-limits.md).
import { connect, createWorker, defineJob, defineQueue } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });

// #region rate-code
// At most 10 starts a second in the queue, and 2 a second per tenant (its concurrency key).
const partnerApi = defineQueue({
  name: 'partner-api',
  rateLimit: { limit: 10, periodMs: 1_000 },
  keyRateLimit: { limit: 2, periodMs: 1_000 },
});

export const syncOrder = defineJob({
  kind: 'sync-order',
  queue: partnerApi,
  payload: z.object({ tenant: z.string(), orderId: z.number() }),
  concurrencyKey: (p) => p.tenant,
  // And the kind on its own: at most 500 an hour, whatever its queue.
  rateLimit: { limit: 500, periodMs: 3_600_000 },
  handler: async (p) => {
    await fetch(`https://api.partner.example/orders/${p.orderId}`, { method: 'PUT' });
  },
});
// #endregion rate-code

// #region rate-worker
export const webhook = defineJob({
  kind: 'webhook',
  payload: z.object({ url: z.url() }),
  destination: (p) => new URL(p.url).host,
  handler: async (p, ctx) => {
    await fetch(p.url, { method: 'POST', signal: ctx.signal });
  },
});

export const worker = createWorker({
  db,
  jobs: [syncOrder, webhook],
  // Per destination; '*' for each destination without its own.
  destinationRateLimits: {
    'hooks.partner.example': { limit: 10, periodMs: 1_000 },
    '*': { limit: 50, periodMs: 1_000 },
  },
  // Wait up to 10 s for a rate's next token before returning (the default).
  rateWaitMs: 10_000,
});

// #endregion rate-worker

// #region rate-ops
import { clearRateLimit, rateLimits, setRateLimit } from 'skiplock';

// The partner asked us to slow down: from the next claim on, in every invocation.
await setRateLimit(db, { destination: 'hooks.partner.example' }, { limit: 2, periodMs: 1_000 }, { by: 'alice' });
await setRateLimit(db, { queue: 'partner-api', perKey: true }, { limit: 1 }, { by: 'alice', reason: 'quota' });
const { rateLimits: set, use } = await rateLimits(db);
console.log(set, use); // the run-time rates; the scopes that started jobs within their period, busiest first
await clearRateLimit(db, { destination: 'hooks.partner.example' }); // the code's rate applies again
// #endregion rate-ops
