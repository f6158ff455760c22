import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  ConfigError,
  DestinationError,
  DiscardError,
  RetryAfterError,
  RetryError,
  SkiplockError,
} from '../base/errors.js';

/**
 * Signed webhook deliveries, the Standard Webhooks way (standardwebhooks.com): each delivery carries
 * `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature` — `v1,<base64 HMAC-SHA256 of
 * "id.timestamp.body">`, one per active secret, space-separated, so a receiver keeps verifying while
 * the sender rotates to a new secret. A receiver checks the signature and the timestamp's age, so a
 * captured delivery replayed later is refused. Secrets are `whsec_<base64>` (its bytes are the key),
 * or any other string (its UTF-8 bytes).
 */

export const WEBHOOK_DEFAULTS = {
  /** How old (or how far ahead) a delivery's timestamp may be when verified. */
  toleranceSeconds: 300,
  /** How long one delivery may take, connection included. */
  timeoutMs: 10_000,
  /** The longest Retry-After honoured; a longer one is cut to this. */
  maxRetryAfterMs: 24 * 3_600_000,
} as const;

/** A delivery that does not verify: no or bad signature (`webhook_signature`), or too old or new (`webhook_timestamp`). */
export class WebhookVerificationError extends SkiplockError {
  constructor(code: 'webhook_signature' | 'webhook_timestamp', message: string) {
    super(code, message);
  }
}

/** The headers that sign one delivery with every active secret. */
export function signWebhook(input: {
  id: string;
  /** Seconds since the epoch. @defaultValue now */
  timestamp?: number;
  body: string;
  secrets: readonly string[];
}): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const keys = secretKeys(input.secrets);
  if (!input.id || /[\s,]/.test(input.id)) throw new ConfigError('a webhook id is required, without spaces or commas');
  const timestamp = input.timestamp ?? Math.floor(Date.now() / 1000);
  const signatures = keys.map((key) => `v1,${signature(key, input.id, timestamp, input.body)}`);
  return {
    'webhook-id': input.id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatures.join(' '),
  };
}

/**
 * Checks a delivery a receiver got: a `v1` signature made with one of `secrets` over the exact body,
 * and a timestamp within `toleranceSeconds` of now. Returns its id (for the receiver's dedupe) and
 * timestamp, or throws a WebhookVerificationError that never says which part was wrong beyond that.
 */
export function verifyWebhook(input: {
  headers: Headers | Record<string, string | string[] | undefined>;
  /** The raw body, exactly as received (not re-serialised). */
  body: string;
  secrets: readonly string[];
  /** @defaultValue 300 */
  toleranceSeconds?: number;
  /** @defaultValue now */
  now?: Date;
}): { id: string; timestamp: number } {
  const keys = secretKeys(input.secrets);
  const header = (name: string) => {
    const value = input.headers instanceof Headers ? input.headers.get(name) : input.headers[name];
    return Array.isArray(value) ? value[0] : (value ?? undefined);
  };
  const id = header('webhook-id');
  const timestampText = header('webhook-timestamp');
  const signatures = header('webhook-signature');
  if (!id || !timestampText || !signatures) {
    throw new WebhookVerificationError(
      'webhook_signature',
      'the delivery is not signed (webhook-id, -timestamp, -signature)',
    );
  }
  const timestamp = Number(timestampText);
  const now = Math.floor((input.now ?? new Date()).getTime() / 1000);
  const tolerance = input.toleranceSeconds ?? WEBHOOK_DEFAULTS.toleranceSeconds;
  if (!/^\d{1,12}$/.test(timestampText) || Math.abs(now - timestamp) > tolerance) {
    throw new WebhookVerificationError(
      'webhook_timestamp',
      `the delivery's timestamp is not within ${tolerance} s of now`,
    );
  }
  const presented = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3)));
  for (const key of keys) {
    const expected = Buffer.from(signature(key, id, timestamp, input.body));
    if (presented.some((p) => p.length === expected.length && timingSafeEqual(p, expected))) return { id, timestamp };
  }
  throw new WebhookVerificationError('webhook_signature', 'no signature of the delivery matches');
}

/**
 * A Retry-After header as milliseconds from `now`: delta-seconds or an HTTP date. Undefined when it
 * is absent or unreadable — never 0 for a missing header (`Number(null)` is 0: an immediate retry).
 */
export function retryAfterMs(header: string | null | undefined, now: number = Date.now()): number | undefined {
  if (header === null || header === undefined) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, WEBHOOK_DEFAULTS.maxRetryAfterMs);
  const at = Date.parse(text);
  if (!/[a-z]/i.test(text) || Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), WEBHOOK_DEFAULTS.maxRetryAfterMs);
}

/** One signed delivery. */
export interface WebhookDelivery {
  url: string;
  /** The delivery's id: the same on every retry of it, so the receiver can drop duplicates. */
  id: string;
  /** The body: a string is sent as is, anything else as JSON. */
  body: unknown;
  /** Active signing secrets, newest first; each signs the delivery. */
  secrets: readonly string[];
  /** The destination its failures count against, when not the job's own. @defaultValue the job's destination */
  destination?: string;
  /** The attempt's signal (`ctx.signal`): the request is aborted with it. */
  signal?: AbortSignal;
  /** @defaultValue 10000 */
  timeoutMs?: number;
  /** More request headers (content-type is application/json unless given). */
  headers?: Record<string, string>;
  /** @defaultValue the global fetch */
  fetch?: typeof fetch;
}

/**
 * Sends one signed delivery and classifies the answer as the job's outcome: 2xx returns; 410 (the
 * receiver is gone) and other 4xx go to the DLQ (`http_410`, `http_4xx`); 429 and 503 with a
 * Retry-After retry after it (and defer the destination); without one, and other 5xx, retry on the
 * kind's backoff; a timeout or a connection error retries and counts against the destination.
 */
export async function deliverWebhook(delivery: WebhookDelivery): Promise<{ status: number }> {
  const body = typeof delivery.body === 'string' ? delivery.body : JSON.stringify(delivery.body);
  const destination = delivery.destination ?? hostOf(delivery.url); // for messages; the breaker's is the job's
  const timeout = AbortSignal.timeout(delivery.timeoutMs ?? WEBHOOK_DEFAULTS.timeoutMs);
  const signal = delivery.signal ? AbortSignal.any([delivery.signal, timeout]) : timeout;
  let response: Response;
  try {
    response = await (delivery.fetch ?? fetch)(delivery.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...delivery.headers,
        ...signWebhook({ id: delivery.id, body, secrets: delivery.secrets }),
      },
      body,
      signal,
      redirect: 'manual',
    });
  } catch (err) {
    if (delivery.signal?.aborted) throw delivery.signal.reason ?? err; // the attempt's own abort
    const what = timeout.aborted ? 'timed out' : `failed: ${err instanceof Error ? err.message : String(err)}`;
    throw new DestinationError(`delivery ${delivery.id} to ${destination} ${what}`, {
      cause: err,
      ...(delivery.destination === undefined ? {} : { destination: delivery.destination }),
    });
  }
  const status = response.status;
  if (status >= 200 && status < 300) {
    await response.body?.cancel().catch(() => {});
    return { status };
  }
  const text = (await response.text().catch(() => '')).slice(0, 2_000);
  const info = { response: { status, body: text } };
  if (status === 429 || status === 503) {
    const wait = retryAfterMs(response.headers.get('retry-after'));
    if (wait !== undefined) {
      throw new RetryAfterError(wait, `${destination} answered ${status}, retry after ${wait} ms`, info);
    }
    throw new RetryError(`${destination} answered ${status} without Retry-After`, info);
  }
  if (status >= 500) throw new RetryError(`${destination} answered ${status}`, info);
  if (status === 410) {
    throw new DiscardError(`${destination} answered 410: the receiver is gone`, { ...info, reason: 'http_410' });
  }
  if (status === 408) throw new RetryError(`${destination} answered 408`, info);
  throw new DiscardError(`${destination} refused the delivery with ${status}`, info);
}

function signature(key: Buffer, id: string, timestamp: number, body: string): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64');
}

function secretKeys(secrets: readonly string[]): Buffer[] {
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new ConfigError('webhook signing needs at least one secret');
  }
  return secrets.map((secret) => {
    if (typeof secret !== 'string' || secret.length < 16) {
      throw new ConfigError('each webhook secret must be a string of at least 16 characters');
    }
    return secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
  });
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    throw new ConfigError('the webhook URL is not a valid URL');
  }
}
