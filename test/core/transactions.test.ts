import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '../../db/connect.js';
import { databaseUrl } from '../helpers/db.js';

// A transaction whose BEGIN fails must give its pooled connection back (destroyed, not reused):
// Drizzle's own sent BEGIN outside its try, so each such failure leaked a client until the pool
// was wedged (found by the chaos harness). A proxy freezes the connections it holds, as a half-open
// network does: BEGIN on a frozen connection times out.
let proxy: Server;
let port = 0;
const held: { client: Socket; upstream: Socket; frozen: boolean }[] = [];

beforeAll(async () => {
  const target = new URL(databaseUrl());
  proxy = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    const link = { client, upstream, frozen: false };
    held.push(link);
    client.on('data', (chunk) => {
      if (!link.frozen) upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (!link.frozen) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  port = (proxy.address() as { port: number }).port;
});
afterAll(async () => {
  for (const link of held) {
    link.client.destroy();
    link.upstream.destroy();
  }
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
});

describe('transactions on a pool (pg)', () => {
  it('a BEGIN that fails gives its connection back: after twice the pool size of them, the pool still works', async () => {
    const url = new URL(databaseUrl());
    url.host = `127.0.0.1:${port}`;
    const db = connect({ connectionString: url.toString(), max: 2, queryTimeoutMs: 300, connectionTimeoutMs: 2_000 });
    try {
      for (let round = 0; round < 4; round++) {
        await db.db.execute(sql`select 1`); // an idle connection in the pool
        for (const link of held) link.frozen = true; // every connection so far goes half-open
        const outcome = await db.db
          .transaction(async (tx) => tx.execute(sql`select 1`))
          .then(
            () => 'committed',
            (err: Error) => err.message,
          );
        expect(outcome).toMatch(/begin/); // the BEGIN timed out on a frozen connection
      }
      // New connections are not frozen: the pool, not wedged by leaked clients, hands one out.
      const after = (await db.db.execute(sql`select 42 as n`)) as unknown as { rows: unknown[] };
      expect(after.rows).toEqual([{ n: 42 }]);
    } finally {
      await db.close().catch(() => {});
    }
  }, 20_000); // a wedged pool would wait here for ever: fail in 20 s, not at the suite's 60 s
});
