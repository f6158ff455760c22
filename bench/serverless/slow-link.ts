import type { AddressInfo } from 'node:net';
import { createServer, type Socket, connect as tcpConnect } from 'node:net';

/**
 * A slow link to Postgres for the burst (`--rtt`): a TCP proxy on loopback that holds every chunk of
 * data half of `roundTripMs` in each direction, so each round trip of the wire protocol — a
 * statement, a connection's start-up — takes `roundTripMs` longer, as a function far from its
 * database sees. Order is kept: every chunk waits the same time, and Node fires timers of one
 * duration in the order they were set. `url(connectionString)` points a connection string at it.
 */
export async function startSlowLink(connectionString: string, roundTripMs: number) {
  const target = new URL(connectionString);
  const host = target.hostname || '127.0.0.1';
  const port = Number(target.port || 5432);
  const halfTrip = roundTripMs / 2;
  const sockets = new Set<Socket>();
  const relay = (from: Socket, to: Socket) => {
    from.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, halfTrip);
    });
    from.on('end', () => setTimeout(() => to.end(), halfTrip));
    from.on('error', () => to.destroy());
    from.on('close', () => setTimeout(() => to.destroy(), halfTrip));
  };
  const server = createServer((client) => {
    const upstream = tcpConnect({ host, port });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port: proxyPort } = server.address() as AddressInfo;
  return {
    roundTripMs,
    /** `url` with its host and port replaced by the proxy's. */
    url(url: string): string {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(proxyPort);
      return through.toString();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
