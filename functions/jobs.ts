/**
 * The job kinds this deployment runs. Replace them with your own: every function entry
 * (worker, enqueue, replay) imports `jobs` from here. These three show the common shapes:
 * an e-mail with an idempotency key, a signed webhook (Standard Webhooks), and a long report that
 * reports progress.
 */
import {
  DiscardError,
  defineJob,
  defineSchedule,
  deliverWebhook,
  RetryAfterError,
  RetryError,
  retryAfterMs,
} from 'skiplock';
// zod/mini: the same schemas as `zod`'s, in a sixth of the bundle every cold start loads (16 KB
// minified against 90 KB). `import * as z from 'zod'` works as well.
import * as z from 'zod/mini';

export interface AppJobSettings {
  /** Where e-mails are POSTed (a provider's API); unset = log only. */
  emailApiUrl?: string;
  /**
   * The webhook signing secrets (`whsec_…`, or any string of 16+ characters), newest first, separated by
   * spaces: each signs every delivery, so receivers keep verifying while you rotate. Required to
   * deliver webhooks.
   */
  webhookSigningSecret?: string;
  webhookTimeoutMs?: number;
  /** First retry delay; doubles per attempt. */
  retryBaseMs?: number;
  reportStepMs?: number;
}

export function createAppJobs(settings: AppJobSettings = {}) {
  const retryBaseMs = settings.retryBaseMs ?? 5_000;
  const backoff = { type: 'exponential' as const, baseMs: retryBaseMs, maxMs: 3_600_000, jitter: 0.25 };

  const sendEmail = defineJob({
    kind: 'send-email',
    queue: 'emails',
    payload: z.object({
      to: z.email(),
      subject: z.string().check(z.minLength(1), z.maxLength(200)),
      template: z.string().check(z.minLength(1)),
      /** The provider dedupes on this, so a re-run after a lost lease sends nothing twice. */
      idempotencyKey: z.string().check(z.minLength(1), z.maxLength(200)),
    }),
    maxAttempts: 5,
    timeoutMs: 10_000,
    backoff,
    handler: async (email, ctx) => {
      if (!settings.emailApiUrl) {
        ctx.logger.info('email (no EMAIL_API_URL set: logged only)', {
          to: email.to,
          idempotencyKey: email.idempotencyKey,
        });
        return;
      }
      const response = await fetch(settings.emailApiUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': email.idempotencyKey },
        body: JSON.stringify(email),
        signal: ctx.signal,
      });
      await failOnBadResponse(response);
    },
  });

  const webhook = defineJob({
    kind: 'deliver-webhook',
    queue: 'webhooks',
    payload: z.object({
      url: z.url(),
      event: z.string().check(z.minLength(1)),
      deliveryId: z.string().check(z.minLength(1)),
      data: z.record(z.string(), z.unknown()),
    }),
    maxAttempts: 4,
    timeoutMs: settings.webhookTimeoutMs ?? 10_000,
    backoff,
    handler: async (hook, ctx) => {
      const secrets = (settings.webhookSigningSecret ?? '').split(/[\s,]+/).filter(Boolean);
      if (secrets.length === 0) {
        throw new DiscardError('WEBHOOK_SIGNING_SECRET is not set: cannot sign the delivery', {
          reason: 'config_error',
        });
      }
      // Signed the Standard Webhooks way; the answer decides: 2xx done, 410 and 4xx dead, 429/503
      // with Retry-After deferred, 5xx and timeouts retried.
      await deliverWebhook({
        url: hook.url,
        id: hook.deliveryId,
        body: { event: hook.event, deliveryId: hook.deliveryId, data: hook.data },
        secrets,
        signal: ctx.signal,
      });
    },
  });

  const buildReport = defineJob({
    kind: 'build-report',
    queue: 'reports',
    payload: z.object({ reportId: z.string().check(z.minLength(1)), sections: z.int().check(z.gte(1), z.lte(100)) }),
    maxAttempts: 3,
    // Within the 30 s of a Cloudflare Worker's or a Netlify scheduled function's invocation, less
    // the safety margin (`skiplock init cloudflare|netlify` writes this file too).
    timeoutMs: 20_000,
    backoff,
    handler: async (report, ctx) => {
      for (let section = 1; section <= report.sections; section++) {
        await new Promise((resolve) => setTimeout(resolve, settings.reportStepMs ?? 50));
        ctx.signal.throwIfAborted();
        const stillHolder = await ctx.reportProgress({ section, of: report.sections });
        if (!stillHolder) return; // another invocation owns the job now
      }
    },
  });

  return [sendEmail, webhook, buildReport] as const;
}

/** 2xx: done. 429: retry after its Retry-After (else the backoff). Other 4xx: permanent (DLQ). 5xx: retry. */
async function failOnBadResponse(response: Response): Promise<void> {
  if (response.ok) return;
  const body = (await response.text().catch(() => '')).slice(0, 2_000);
  const info = { response: { status: response.status, body } };
  // A 429 without Retry-After retries on the backoff (Number(null) would be 0: at once).
  const wait = retryAfterMs(response.headers.get('retry-after'));
  if (response.status === 429 && wait !== undefined) throw new RetryAfterError(wait, 'rate limited (429)', info);
  if (response.status >= 400 && response.status < 500) {
    throw new DiscardError(`rejected with ${response.status}`, info);
  }
  throw new RetryError(`receiver answered ${response.status}`, info);
}

export const jobs = createAppJobs({
  emailApiUrl: process.env.EMAIL_API_URL || undefined,
  webhookSigningSecret: process.env.WEBHOOK_SIGNING_SECRET || undefined,
});

/**
 * Recurring jobs: the worker function enqueues each occurrence once, as its scheduled invocations
 * start (no cron of their own). Replace with your own, or export an empty list.
 */
export const schedules = [
  defineSchedule({
    name: 'nightly-report',
    cron: '0 3 * * *',
    timezone: 'UTC',
    job: jobs[2],
    payload: (at) => ({ reportId: `nightly-${at.toISOString().slice(0, 10)}`, sections: 5 }),
  }),
];
