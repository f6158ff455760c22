// Signed webhook deliveries and their verification (docs/webhooks.md).

// #region signed-delivery
import { defineJob, deliverWebhook } from 'skiplock';
import { z } from 'zod';

export const partnerWebhook = defineJob({
  kind: 'partner-webhook',
  queue: 'webhooks',
  payload: z.object({
    url: z.url(),
    deliveryId: z.string(),
    event: z.string(),
    data: z.record(z.string(), z.unknown()),
  }),
  maxAttempts: 8,
  // Jobs of one partner share a circuit breaker: a timeout, a refused connection or a 5xx counts.
  destination: (p) => new URL(p.url).host,
  handler: async (p, ctx) => {
    await deliverWebhook({
      url: p.url,
      id: p.deliveryId, // the same on every retry: the receiver drops duplicates by it
      body: { type: p.event, data: p.data },
      // Newest first; during a rotation both sign every delivery.
      secrets: (process.env.WEBHOOK_SECRETS ?? '').split(' ').filter(Boolean),
      signal: ctx.signal,
    });
  },
});

// #endregion signed-delivery

// #region verify
import { verifyWebhook, WebhookVerificationError } from 'skiplock/webhooks';

/** The receiver's route (a Web Request handler: Next.js, Vercel, Hono…). */
export async function POST(request: Request): Promise<Response> {
  const body = await request.text(); // the raw body: verify before parsing
  try {
    const { id } = verifyWebhook({
      headers: request.headers,
      body,
      secrets: [process.env.PARTNER_WEBHOOK_SECRET ?? ''],
    });
    await handleOnce(id, JSON.parse(body));
    return new Response(null, { status: 204 });
  } catch (err) {
    if (err instanceof WebhookVerificationError) return new Response('invalid signature or too old', { status: 401 });
    throw err;
  }
}
// #endregion verify

async function handleOnce(_id: string, _event: unknown): Promise<void> {}
