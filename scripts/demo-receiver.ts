import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhook } from 'skiplock';

/**
 * The demo's outside world: an e-mail API that dedupes on Idempotency-Key, and a webhook
 * receiver that verifies each delivery's signature (verifyWebhook) and misbehaves like a real partner — about one
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
    let delivery: string;
    try {
      delivery = verifyWebhook({ headers: req.headers, body, secrets: [signingSecret] }).id;
    } catch {
      badSignatures++;
      res.writeHead(401).end('bad signature');
      return;
    }
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
