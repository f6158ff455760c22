import { connect, createServer, type Server, type Socket } from 'node:net';

export interface FaultProxyOptions {
  upstreamHost: string;
  upstreamPort: number;
  /** Chance per connection per tick (100 ms) of a fault while faults are on. */
  faultChancePerTick: number;
  /** Of the faults, the share that leave the socket half-open instead of closing it. */
  halfOpenShare: number;
}

/**
 * A TCP proxy between the workers and Postgres that misbehaves on purpose: it closes
 * connections abruptly (both sides reset) or leaves them half-open (both sockets stay up,
 * nothing is forwarded any more — what a dropped NAT mapping or a dead peer looks like).
 */
export async function startFaultProxy(options: FaultProxyOptions) {
  const live = new Set<{ client: Socket; upstream: Socket; frozen: boolean }>();
  let faultsOn = true;
  let drops = 0;
  let halfOpens = 0;
  const server: Server = createServer((client) => {
    const upstream = connect({ host: options.upstreamHost, port: options.upstreamPort });
    const link = { client, upstream, frozen: false };
    live.add(link);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (chunk) => {
      if (!link.frozen) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!link.frozen) client.write(chunk);
    });
    const close = () => {
      live.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
    client.on('error', close);
    upstream.on('error', close);
  });
  const ticker = setInterval(() => {
    if (!faultsOn) return;
    for (const link of live) {
      if (link.frozen || Math.random() >= options.faultChancePerTick) continue;
      if (Math.random() < options.halfOpenShare) {
        link.frozen = true;
        halfOpens++;
        // Keep it half-open long enough to matter, then let it go.
        setTimeout(() => {
          link.client.destroy();
          link.upstream.destroy();
        }, 20_000).unref();
      } else {
        drops++;
        link.client.resetAndDestroy();
        link.upstream.destroy();
      }
    }
  }, 100);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    port: address.port,
    faults: () => drops + halfOpens,
    counts: () => ({ drops, halfOpens }),
    setFaults: (on: boolean) => {
      faultsOn = on;
    },
    close: async () => {
      clearInterval(ticker);
      for (const link of live) {
        link.client.destroy();
        link.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
