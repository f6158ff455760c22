import { type AddressInfo, createServer, type Socket } from 'node:net';

/** A TCP server that accepts every connection, reads, and never answers: a stuck or cold target. */
export interface StuckTarget {
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Destroys its connections (their clients see a reset) and closes it. */
  close(): Promise<void>;
}

export async function startStuckTarget(): Promise<StuckTarget> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => {});
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => sockets.size,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
