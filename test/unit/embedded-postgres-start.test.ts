import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveDevDatabase, startEmbeddedPostgres } from '../../scripts/local-postgres.js';

// `npm run example`, `example:flow`, the demo and `npm run dev` each start an embedded Postgres when
// DATABASE_URL is unset. They shared one fixed port: run side by side (tests, a loaded CI machine),
// the second's start rejected with `undefined` and the process died with a bare
// "triggerUncaughtException … undefined" (#28 i).
const servers: Server[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

describe('embedded Postgres for the examples and the dev server', () => {
  it('two started side by side both run, each on its own port', async () => {
    const saved = process.env.DATABASE_URL;
    delete process.env.DATABASE_URL;
    try {
      const [a, b] = await Promise.all([resolveDevDatabase(), resolveDevDatabase()]);
      try {
        expect(a.embedded && b.embedded).toBe(true);
        expect(new URL(a.url).port).not.toBe(new URL(b.url).port);
      } finally {
        await Promise.all([a.stop(), b.stop()]);
      }
    } finally {
      if (saved !== undefined) process.env.DATABASE_URL = saved;
    }
  });

  it('a start that fails says what happened and what to do, never `undefined`', async () => {
    // Something else holds the port.
    const busy = createServer();
    servers.push(busy);
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const { port } = busy.address() as { port: number };
    const failed = await startEmbeddedPostgres(port).then(
      () => 'started',
      (err: unknown) => (err instanceof Error ? err.message : String(err)),
    );
    expect(failed).toMatch(new RegExp(`embedded Postgres did not start on port ${port}`));
    expect(failed).toMatch(/set DATABASE_URL/);
  });
});
