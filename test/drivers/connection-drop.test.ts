import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

// A connection that drops while a transaction holds it (a network fault, a restarted server, a proxy
// reset) must fail that transaction's statements — never crash the process. Found by the chaos
// harness: node-postgres emits 'error' on the checked-out client, which nothing listened to.
let t: TestContext;
useTestSchema('drivers-connection-drop', (ctx) => {
  t = ctx;
});

describe(`a connection dropped inside a transaction (${testDriver()})`, () => {
  it('fails the transaction with an error, and the process and the pool go on (neon-http: no transactions)', async () => {
    const db = openDb({ max: 2 });
    if (testDriver() === 'neon-http') {
      // No interactive transactions on this driver: refused with an error, nothing crashes.
      await expect(db.db.transaction(async () => {})).rejects.toThrow(/transaction/i);
      expect(db.interactiveTransactions).toBe(false);
      await db.close();
      return;
    }
    try {
      const failed = await db.db
        .transaction(async (tx) => {
          const result = (await tx.execute(sql`select pg_backend_pid() as pid`)) as unknown as {
            rows: { pid: number }[];
          };
          const [row] = result.rows;
          // Terminated (and waited for) while the transaction is idle between two statements.
          await t.admin.query('select pg_terminate_backend($1, 5000)', [row?.pid]);
          await t.admin.query('select 1'); // the client's socket hears of it meanwhile
          await tx.execute(sql`select 1`);
        })
        .then(
          () => 'committed',
          () => 'failed',
        );
      expect(failed).toBe('failed');
      // The pool hands out a working connection afterwards.
      const after = (await db.db.execute(sql`select 42 as n`)) as unknown as { rows: unknown[] };
      expect(after.rows).toEqual([{ n: 42 }]);
    } finally {
      await db.close();
    }
  });
});
