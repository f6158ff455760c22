import { type AddressInfo, createServer, type Socket } from 'node:net';

/** A TCP server that accepts every connection, reads, and never answers: a stuck or cold target. */
export interface StuckTarget {
  port: number;
  /** Connections accepted so far. */
  accepted(): number;
  /** Accepted connections their clients have not closed (a request still waiting for its answer). */
  open(): number;
  /**
   * Resolves with the count once a connection has been accepted (at once if one was); rejects after
   * `boundMs` without one. The request under test goes out after the response it waits behind.
   */
  firstAccepted(boundMs?: number): Promise<number>;
  /** Destroys its connections (their clients see a reset) and closes it. */
  close(): Promise<void>;
}

export async function startStuckTarget(): Promise<StuckTarget> {
  const sockets = new Set<Socket>();
  const open = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('end', () => open.delete(socket));
    socket.on('data', () => {});
    socket.on('error', () => {});
  });
  const firstAccepted = (boundMs = 10_000) =>
    new Promise<number>((resolve, reject) => {
      if (sockets.size > 0) return resolve(sockets.size);
      const timer = setTimeout(
        () => reject(new Error(`no connection reached the stuck target in ${boundMs} ms`)),
        boundMs,
      );
      server.once('connection', () => {
        clearTimeout(timer);
        resolve(sockets.size);
      });
    });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => sockets.size,
    open: () => open.size,
    firstAccepted,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
