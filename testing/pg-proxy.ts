import { connect, createServer, type Server } from 'node:net';
import { Faults } from './faults.js';
import { WireLink } from './wire-faults.js';

export interface PgProxy {
  /** The port on 127.0.0.1 that forwards to the upstream Postgres. */
  port: number;
  /** A connection string through the proxy: `url` with its host and port replaced. */
  urlFor(url: string): string;
  faults: Faults;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of Postgres for node-postgres (and anything else that speaks the wire
 * protocol), with `faults` on every connection: what the network does to a pg client — resets,
 * half-open sockets, answers lost after COMMIT, slow answers.
 */
export async function startPgProxy(options: {
  upstreamHost?: string;
  upstreamPort?: number;
  faults?: Faults;
}): Promise<PgProxy> {
  const faults = options.faults ?? new Faults();
  const links = new Set<WireLink>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: options.upstreamHost ?? '127.0.0.1', port: options.upstreamPort ?? 5432 });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    const link = new WireLink(
      {
        toServer: (chunk) => upstream.write(chunk),
        toClient: (chunk) => client.write(chunk),
        reset: () => {
          client.resetAndDestroy();
          upstream.destroy();
        },
      },
      faults,
    );
    links.add(link);
    client.on('data', (chunk) => link.fromClient(chunk));
    upstream.on('data', (chunk) => link.fromServer(chunk));
    const close = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('close', close);
      socket.on('error', close);
    }
  });
  const ticker = startConnectionFaults(links, faults);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    urlFor: (url) => {
      const through = new URL(url);
      through.hostname = '127.0.0.1';
      through.port = String(port);
      return through.toString();
    },
    faults,
    close: async () => {
      clearInterval(ticker);
      for (const link of links) link.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Every 100 ms, each open link may be reset or frozen between its statements (the random faults' per-tick chance). */
export function startConnectionFaults(links: Set<WireLink>, faults: Faults): NodeJS.Timeout {
  const ticker = setInterval(() => {
    for (const link of links) {
      const fault = faults.drawConnectionFault();
      if (fault === 'reset') link.close();
      else if (fault === 'freeze') link.freeze(20_000);
    }
  }, 100);
  ticker.unref();
  return ticker;
}
