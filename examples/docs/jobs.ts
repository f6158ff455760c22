/**
 * The job kinds the docs' examples share: a webhook delivery and an e-mail. In an app this is
 * functions/jobs.ts, which every function entry imports.
 */
// #region define-job
import { DiscardError, defineJob, RetryAfterError } from 'skiplock';
import { z } from 'zod';

export const deliverWebhook = defineJob({
  kind: 'deliver-webhook',
  queue: 'webhooks',
  payload: z.object({ url: z.url(), eventId: z.string(), body: z.record(z.string(), z.unknown()) }),
  maxAttempts: 8,
  timeoutMs: 15_000,
  backoff: { type: 'exponential', baseMs: 5_000, factor: 2, maxMs: 3_600_000, jitter: 0.25 },
  handler: async (payload, ctx) => {
    const response = await fetch(payload.url, {
      method: 'POST',
      body: JSON.stringify(payload.body),
      headers: { 'idempotency-key': payload.eventId },
      signal: ctx.signal, // fires at the job's timeout, the invocation's deadline, or a lost lease
    });
    if (response.status === 429) {
      throw new RetryAfterError(Number(response.headers.get('retry-after') ?? 60) * 1000, 'rate limited');
    }
    if (response.status >= 400 && response.status < 500) {
      const body = await response.text();
      throw new DiscardError('rejected by receiver', { response: { status: response.status, body } });
    }
    if (!response.ok) throw new Error(`receiver answered ${response.status}`); // retried with backoff
  },
});
// #endregion define-job

export const sendEmail = defineJob({
  kind: 'send-email',
  queue: 'emails',
  payload: z.object({ to: z.email(), subject: z.string().min(1) }),
  maxAttempts: 5,
  timeoutMs: 10_000,
  handler: async (email, ctx) => {
    ctx.logger.info('sending e-mail', { to: email.to, idempotencyKey: `email-${ctx.id}` });
  },
});

// #region jobs-array
// Every function entry (worker, enqueue, replay) imports this list.
export const jobs = [deliverWebhook, sendEmail];
// #endregion jobs-array
