import type { Server } from 'node:net';

/** Listens on 127.0.0.1:`port` (0: a free one); a port in use rejects, naming it, instead of hanging. */
export function listenOn(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`127.0.0.1:${port} is in use: pick another port, or 0 for a free one`)
          : err,
      );
    server.once('error', failed);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', failed);
      resolve();
    });
  });
}
