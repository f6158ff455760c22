// Destinations and circuit breakers (docs/destinations.md).
import { connect, createEnqueuer, createWorker } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });

// #region breaker
import { DiscardError, defineJob, RetryAfterError, RetryError, retryAfterMs } from 'skiplock';

export const webhook = defineJob({
  kind: 'webhook',
  payload: z.object({ url: z.url(), body: z.record(z.string(), z.unknown()) }),
  // Jobs of one partner share a breaker: its host.
  destination: (p) => new URL(p.url).host,
  // Optional: the defaults are 5 failures, at least half the attempts, within 60 s; 30 s cool-down.
  breaker: { failures: 5, failureRate: 0.5, windowMs: 60_000, coolDownMs: 30_000, maxCoolDownMs: 600_000 },
  handler: async (p, ctx) => {
    // A refused connection, a timeout (ctx.signal, or the kind's timeoutMs) and a 5xx count against
    // the destination; a 4xx does not (the partner answered).
    const res = await fetch(p.url, { method: 'POST', body: JSON.stringify(p.body), signal: ctx.signal });
    if (res.ok) return;
    const info = { response: { status: res.status, body: await res.text() } };
    // retryAfterMs: seconds or an HTTP date; undefined when absent (then the kind's backoff, never 0).
    const wait = retryAfterMs(res.headers.get('retry-after'));
    if ((res.status === 429 || res.status === 503) && wait !== undefined) {
      // Defers the whole destination (every invocation) until then, not only this job.
      throw new RetryAfterError(wait, `answered ${res.status}`, info);
    }
    if (res.status >= 400 && res.status < 500) throw new DiscardError(`rejected with ${res.status}`, info);
    throw new RetryError(`answered ${res.status}`, info);
  },
});

await createEnqueuer().enqueue(db, webhook, { url: 'https://hooks.partner.example/in', body: { id: 1 } });
// #endregion breaker

// #region breaker-worker
// Per destination, over the kind's settings: a partner known to be flaky trips later.
export const worker = createWorker({
  db,
  jobs: [webhook],
  breakers: { 'hooks.partner.example': { failures: 10, coolDownMs: 120_000 } },
});

// #endregion breaker-worker

// #region breaker-ops
import { breakers, resetBreaker } from 'skiplock';

console.log(await breakers(db)); // [{ name, state, failures, calls, openedAt, nextProbeAt, deferredUntil, trips, … }]
await resetBreaker(db, 'hooks.partner.example', { by: 'alice' }); // closed at once; its jobs run again
// #endregion breaker-ops
