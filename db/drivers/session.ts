import type { AnyPgDatabase } from '../connection-options.js';

/**
 * The pools' `onConnect` hook (awaited before a new connection serves anything): JIT off. A proxy
 * that refuses SET costs nothing but the setting.
 */
export async function jitOff(client: { query(text: string): Promise<unknown> }): Promise<void> {
  await client.query('set jit = off').catch(() => {});
}

/**
 * SkiplockDb.session for a pool: one connection for the whole of `work`. A session whose work
 * failed may hold settings or locks, so it is closed rather than pooled again.
 */
export function pooledSession<C extends { release(err?: Error): void }>(
  connect: () => Promise<C>,
  wrap: (client: C) => AnyPgDatabase,
): <T>(work: (session: AnyPgDatabase) => Promise<T>) => Promise<T> {
  return async (work) => {
    const client = await connect();
    let broken: Error | undefined;
    try {
      return await work(wrap(client));
    } catch (err) {
      broken = err instanceof Error ? err : new Error(String(err));
      throw err;
    } finally {
      client.release(broken);
    }
  };
}
