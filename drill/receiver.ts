import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The drill's partners, one local HTTP server: `POST /hook/<partner>/<n>`. The failing partner
 * answers 503 while it is down; the others answer 500 to a share of requests and leave another
 * share hanging (no answer until the client gives up). Every request is recorded.
 */
export interface Receiver {
  url: string;
  /** Requests per partner, with the time each arrived (ms since the epoch). */
  requests: Map<string, number[]>;
  down(until: number): void;
  close(): Promise<void>;
}

export async function startReceiver(options: {
  failing: string;
  errorShare: number;
  hangShare: number;
  random: () => number;
}): Promise<Receiver> {
  const requests = new Map<string, number[]>();
  const hanging = new Set<ServerResponse>();
  let downUntil = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const [, , partner = ''] = (req.url ?? '').split('/');
    const now = Date.now();
    // When the sender says when it sent (x-sent-at, ms), count that: the sender and this server
    // share one process, and under load its event loop can take up requests sent over two seconds
    // within one, which is no burst of the partner's traffic.
    const sentAt = Number(req.headers['x-sent-at']);
    requests.set(partner, [...(requests.get(partner) ?? []), Number.isFinite(sentAt) && sentAt > 0 ? sentAt : now]);
    req.resume();
    req.on('end', () => {
      if (partner === options.failing) {
        res.writeHead(now < downUntil ? 503 : 200).end(now < downUntil ? 'down' : 'ok');
        return;
      }
      const draw = options.random();
      if (draw < options.errorShare) res.writeHead(500).end('error');
      else if (draw < options.errorShare + options.hangShare) hanging.add(res);
      else res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    down(until) {
      downUntil = until;
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A small seeded generator, so a drill's 500s and hangs fall the same way each run. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
