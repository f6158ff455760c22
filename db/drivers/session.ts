/**
 * The pools' `onConnect` hook (awaited before a new connection serves anything): JIT off. A proxy
 * that refuses SET costs nothing but the setting.
 */
export async function jitOff(client: { query(text: string): Promise<unknown> }): Promise<void> {
  await client.query('set jit = off').catch(() => {});
}
