import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The demo's outside world: an e-mail API that dedupes on Idempotency-Key, and a webhook
 * receiver that checks the HMAC signature and misbehaves like a real partner — about one
 * call in ten answers 500, one in ten hangs past the job's timeout, some endpoints are
 * gone (410) and one is down for good — until it is told to be healthy.
 */
export async function startDemoReceiver(signingSecret: string) {
  const emailsSent = new Set<string>();
  const webhooksAccepted = new Set<string>();
  let healthy = false;
  let calls = 0;
  let badSignatures = 0;
  const pending = new Set<NodeJS.Timeout>();

  const read = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };

  const server = createServer(async (req, res) => {
    const body = await read(req);
    calls++;
    if (req.url === '/email') {
      emailsSent.add(String(req.headers['idempotency-key']));
      res.writeHead(202).end();
      return;
    }
    const signature = String(req.headers['x-skiplock-signature'] ?? '');
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(signature) ?? [];
    const expected = createHmac('sha256', signingSecret).update(`${t}.${body}`).digest();
    if (!v1 || !timingSafeEqual(Buffer.from(v1, 'hex'), expected)) {
      badSignatures++;
      res.writeHead(401).end('bad signature');
      return;
    }
    const delivery = String(req.headers['x-skiplock-delivery']);
    if (!healthy) {
      if (req.url?.startsWith('/hooks/gone')) return void res.writeHead(410).end('endpoint removed');
      if (req.url?.startsWith('/hooks/down')) return void res.writeHead(503).end('maintenance');
      const roll = Math.random();
      if (roll < 0.1) return void res.writeHead(500).end('internal error');
      if (roll < 0.2) {
        // Hang past the job's timeout; the worker's signal aborts the request.
        const timer = setTimeout(() => {
          pending.delete(timer);
          res.writeHead(200).end();
        }, 5_000);
        pending.add(timer);
        res.on('close', () => clearTimeout(timer));
        return;
      }
    }
    webhooksAccepted.add(delivery);
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    emailsSent,
    webhooksAccepted,
    stats: () => ({ calls, badSignatures }),
    becomeHealthy: () => {
      healthy = true;
    },
    close: async () => {
      for (const timer of pending) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
