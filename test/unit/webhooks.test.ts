import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DestinationError, DiscardError, RetryAfterError, RetryError } from '../../base/errors.js';
import { deliverWebhook, retryAfterMs, signWebhook, verifyWebhook } from '../../core/webhooks.js';

// Signed deliveries against a real HTTP receiver that verifies them with an independent
// implementation (the `standardwebhooks` npm package), and the answer → outcome classification.
const newSecret = `whsec_${randomBytes(24).toString('base64')}`;
const oldSecret = `whsec_${randomBytes(24).toString('base64')}`;

/** What the receiver answers next, and what it saw. */
let answer: { status: number; headers?: Record<string, string>; hangMs?: number } = { status: 200 };
const seen: { headers: IncomingHttpHeaders; body: string; verifiedWith: string[] }[] = [];
let server: Server;
let url = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      // The receiver verifies with the library, with each secret it knows (one at a time).
      const verifiedWith = [newSecret, oldSecret].filter((secret) => {
        try {
          new Webhook(secret).verify(body, req.headers as Record<string, string>);
          return true;
        } catch {
          return false;
        }
      });
      seen.push({ headers: req.headers, body, verifiedWith });
      const reply = () => {
        res.writeHead(answer.status, answer.headers);
        res.end(answer.status >= 400 ? 'receiver says no' : 'ok');
      };
      if (answer.hangMs) setTimeout(reply, answer.hangMs);
      else reply();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('signed webhook deliveries', () => {
  it('a delivery verifies with the standardwebhooks library under each active secret (rotation)', async () => {
    answer = { status: 204 };
    seen.length = 0;
    const body = { event: 'invoice.paid', data: { id: 'in_1', amount: 1200, note: 'ünïcødé' } };
    expect(await deliverWebhook({ url, id: 'msg_1', body, secrets: [newSecret, oldSecret] })).toEqual({ status: 204 });
    expect(seen[0]?.verifiedWith).toEqual([newSecret, oldSecret]);
    expect(seen[0]?.headers['webhook-id']).toBe('msg_1');
    expect(JSON.parse(seen[0]?.body ?? '')).toEqual(body);
    // Only the new secret after the rotation ends: the old receiver's secret no longer verifies.
    await deliverWebhook({ url, id: 'msg_2', body, secrets: [newSecret] });
    expect(seen[1]?.verifiedWith).toEqual([newSecret]);
    // And the library's own signatures verify with verifyWebhook.
    const at = new Date();
    const signed = new Webhook(oldSecret).sign('msg_3', at, 'raw body');
    const headers = {
      'webhook-id': 'msg_3',
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signed,
    };
    expect(verifyWebhook({ headers, body: 'raw body', secrets: [newSecret, oldSecret] })).toMatchObject({
      id: 'msg_3',
    });
  });

  it('verifyWebhook refuses a changed body, a wrong secret, a replay past the tolerance, and missing headers', () => {
    const now = new Date('2026-11-26T12:00:00Z');
    const timestamp = Math.floor(now.getTime() / 1000);
    const headers = signWebhook({ id: 'msg_9', timestamp, body: '{"a":1}', secrets: [newSecret] });
    expect(verifyWebhook({ headers, body: '{"a":1}', secrets: [newSecret], now })).toEqual({ id: 'msg_9', timestamp });
    const refused = (input: Partial<Parameters<typeof verifyWebhook>[0]>) => {
      try {
        verifyWebhook({ headers, body: '{"a":1}', secrets: [newSecret], now, ...input });
        return 'verified';
      } catch (err) {
        return (err as { code: string }).code;
      }
    };
    expect(refused({ body: '{"a":2}' })).toBe('webhook_signature');
    expect(refused({ secrets: [oldSecret] })).toBe('webhook_signature');
    // The same delivery captured and replayed six minutes later (tolerance 5 minutes): refused by age.
    expect(refused({ now: new Date(now.getTime() + 6 * 60_000) })).toBe('webhook_timestamp');
    expect(refused({ headers: { ...headers, 'webhook-signature': undefined } })).toBe('webhook_signature');
    // The library refuses a replay six minutes old too.
    const old = signWebhook({
      id: 'msg_8',
      timestamp: Math.floor(Date.now() / 1000) - 360,
      body: 'x',
      secrets: [newSecret],
    });
    expect(() => new Webhook(newSecret).verify('x', old)).toThrow(/too old/i);
  });

  it('classifies the answer: 2xx done, 410 and other 4xx dead, 429/503 with Retry-After deferred, 5xx retried', async () => {
    const outcome = async (status: number, headers?: Record<string, string>) => {
      answer = { status, ...(headers ? { headers } : {}) };
      try {
        await deliverWebhook({ url, id: `msg_${status}`, body: {}, secrets: [newSecret] });
        return 'done';
      } catch (err) {
        if (err instanceof RetryAfterError) return `retry after ${err.delayMs}`;
        if (err instanceof DestinationError) return 'destination failed';
        if (err instanceof RetryError) return `retry (${err.response?.status})`;
        if (err instanceof DiscardError) return `dead ${err.reason}`;
        return `other ${String(err)}`;
      }
    };
    expect(await outcome(200)).toBe('done');
    expect(await outcome(410)).toBe('dead http_410');
    expect(await outcome(404)).toBe('dead http_4xx');
    expect(await outcome(429, { 'retry-after': '7' })).toBe('retry after 7000');
    expect(await outcome(503, { 'retry-after': '2' })).toBe('retry after 2000');
    // Without Retry-After: the kind's backoff, never an immediate retry (Number(null) is 0).
    expect(await outcome(429)).toBe('retry (429)');
    expect(await outcome(503)).toBe('retry (503)');
    expect(await outcome(500)).toBe('retry (500)');
    answer = { status: 200, hangMs: 1_000 };
    await expect(
      deliverWebhook({ url, id: 'msg_slow', body: {}, secrets: [newSecret], timeoutMs: 100 }),
    ).rejects.toThrow(DestinationError);
  });

  it('reads Retry-After as seconds or an HTTP date, and a missing or unreadable one as none', () => {
    const now = Date.parse('2026-11-26T12:00:00Z');
    expect(retryAfterMs('120', now)).toBe(120_000);
    expect(retryAfterMs('Thu, 26 Nov 2026 12:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(retryAfterMs('', now)).toBeUndefined();
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs('9999999', now)).toBe(24 * 3_600_000);
  });
});
