import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { WebSocketServer } from 'ws';
import { Faults } from './faults.js';
import { listenOn } from './listen.js';
import { startConnectionFaults } from './pg-proxy.js';
import { WireLink } from './wire-faults.js';

/**
 * A WebSocket → TCP proxy like Neon's wsproxy: the Neon driver sends raw Postgres wire
 * bytes in binary frames to ws://host:port/v1?address=pghost:pgport. `faults` act on each
 * connection as on the TCP proxy's (a socket closed mid-transaction, a half-open socket, delayed
 * frames, an answer lost after COMMIT).
 */
export async function startNeonWsProxy(
  options: { faults?: Faults; port?: number } = {},
): Promise<{ port: number; faults: Faults; close(): Promise<void> }> {
  const faults = options.faults ?? new Faults();
  const links = new Set<WireLink>();
  const server: Server = createServer();
  const wss = new WebSocketServer({ server });
  // ws repeats the server's errors here; a port in use already rejects listenOn, naming it.
  wss.on('error', () => {});
  wss.on('connection', (socket, request) => {
    const address = new URL(request.url ?? '/', 'http://proxy').searchParams.get('address') ?? '';
    const [host, port] = address.split(':');
    const upstream = connect({ host: host ?? '127.0.0.1', port: Number(port ?? 5432) });
    upstream.setNoDelay(true);
    const link = new WireLink(
      {
        toServer: (chunk) => upstream.write(chunk),
        toClient: (chunk) => socket.send(chunk),
        reset: () => {
          socket.terminate();
          upstream.destroy();
        },
      },
      faults,
    );
    links.add(link);
    const close = () => {
      links.delete(link);
      socket.close();
      upstream.destroy();
    };
    upstream.on('data', (chunk) => link.fromServer(chunk));
    upstream.on('close', close);
    upstream.on('error', close);
    socket.on('message', (data) => link.fromClient(data as Buffer));
    socket.on('close', close);
    socket.on('error', close);
  });
  const ticker = startConnectionFaults(links, faults);
  await listenOn(server, options.port ?? 0);
  return {
    port: (server.address() as AddressInfo).port,
    faults,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(ticker);
        for (const client of wss.clients) client.terminate();
        for (const link of links) link.close();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
