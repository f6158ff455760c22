import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { WebSocketServer } from 'ws';

/**
 * A WebSocket → TCP proxy like Neon's wsproxy: the Neon driver sends raw Postgres wire
 * bytes in binary frames to ws://host:port/v1?address=pghost:pgport.
 */
export async function startNeonWsProxy(): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer();
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket, request) => {
    const address = new URL(request.url ?? '/', 'http://proxy').searchParams.get('address') ?? '';
    const [host, port] = address.split(':');
    const upstream = connect({ host: host ?? '127.0.0.1', port: Number(port ?? 5432) });
    upstream.setNoDelay(true);
    upstream.on('data', (chunk) => socket.send(chunk));
    upstream.on('close', () => socket.close());
    upstream.on('error', () => socket.close());
    socket.on('message', (data) => upstream.write(data as Buffer));
    socket.on('close', () => upstream.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
