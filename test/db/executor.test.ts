import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { SkiplockConnection } from '../../db/connect.js';
import { connectLazily } from '../../db/connect-lazy.js';
import { sqlStateOf } from '../../db/execute.js';
import { executorOf } from '../../db/executor-of.js';
import { queryExecutor } from '../../db/query-executor.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { captureStatements } from '../helpers/statements.js';

// Each driver's Executor (db/executor.ts), the seam every statement runs on, held to the same
// contract on every driver (as River's riverdrivertest holds each of its drivers): the rows, the
// hot path, a batch, a transaction, and what the statement listeners hear.
let t: TestContext;
useTestSchema('executor', (ctx) => {
  t = ctx;
});
const probe = () => sql.raw(`"${t.schema}".executor_probe`);
const written = async () =>
  (await t.admin.query(`select n from "${t.schema}".executor_probe order by n`)).rows.map((r) => r.n as number);

// On pg, the deployed functions' pool (no Drizzle database: db/drivers/pg-lean.ts) as well.
let lean: SkiplockConnection | undefined;
beforeAll(async () => {
  await t.admin.query(`create table if not exists "${t.schema}".executor_probe (n int not null)`);
  if (testDriver() === 'pg') lean = await connectLazily({ connectionString: databaseUrl(), driver: 'pg' });
});
afterAll(() => lean?.close());
const connections: { name: string; connection: () => SkiplockConnection }[] = [
  { name: 'connect()', connection: () => t.db },
];
if (testDriver() === 'pg') {
  connections.push({
    name: 'the lean pool',
    connection: () => {
      if (!lean) throw new Error('the lean pool did not open');
      return lean;
    },
  });
}
beforeEach(async () => {
  await t.admin.query(`truncate "${t.schema}".executor_probe`);
});

describe.each(connections)(`the Executor of $name (${testDriver()})`, ({ connection }) => {
  it('query and hot give the same rows: objects by column name, timestamps as the text Postgres sent', async () => {
    const statement = sql`select ${7}::int as n, ${'a'}::text as s, '2026-01-02 03:04:05+00'::timestamptz as at`;
    const rows = await connection().executor.query(statement);
    expect(rows).toEqual([{ n: 7, s: 'a', at: expect.stringMatching(/^2026-01-02 0\d:04:05/) }]);
    expect(await connection().executor.hot(statement, { cheap: false })).toEqual(rows);
    expect(await connection().executor.hot(statement, { cheap: true })).toEqual(rows);
  });

  it("a batch runs its statements in order in one transaction and returns each one's rows", async () => {
    const [first, second, third] = await connection().executor.batch([
      sql`insert into ${probe()} (n) values (1) returning n`,
      sql`select pg_current_xact_id()::text as tx`,
      sql`select pg_current_xact_id()::text as tx, (select count(*)::int from ${probe()}) as seen`,
    ]);
    expect(first).toEqual([{ n: 1 }]);
    const [{ tx } = { tx: 'none' }] = second as { tx: string }[];
    expect(third).toEqual([{ tx, seen: 1 }]);
  });

  it('a batch whose statement fails writes nothing', async () => {
    const failed = connection().executor.batch([sql`insert into ${probe()} (n) values (1)`, sql`select 1 / 0`]);
    // The driver's own error (statements map it: db/execute.ts): division by zero.
    expect(sqlStateOf(await failed.catch((err: unknown) => err))).toBe('22012');
    expect(await written()).toEqual([]);
  });

  it('a transaction commits what its work wrote and rolls back when the work throws (neon-http has none)', async () => {
    const { transaction } = connection().executor;
    if (testDriver() === 'neon-http') {
      expect(transaction).toBeUndefined();
      return;
    }
    if (!transaction) throw new Error(`${testDriver()} should open transactions`);
    await transaction((tx) => tx.query(sql`insert into ${probe()} (n) values (1)`));
    const thrown = transaction(async (tx) => {
      await tx.query(sql`insert into ${probe()} (n) values (2)`);
      throw new Error('undo');
    });
    await expect(thrown).rejects.toThrow('undo');
    expect(await written()).toEqual([1]);
  });

  it('the listeners hear each statement once, a batch statement by statement, a transaction with its BEGIN and COMMIT', async () => {
    const { texts } = await captureStatements(testDriver(), async () => {
      await connection().executor.query(sql`select 1 as a`);
      await connection().executor.hot(sql`select 2 as b`, { cheap: false });
      await connection().executor.batch([sql`select 3 as c`, sql`select 4 as d`]);
    });
    const batch = ['select 3 as c', 'select 4 as d'];
    expect(texts).toEqual([
      'select 1 as a',
      'select 2 as b',
      ...(testDriver() === 'neon-http' ? batch : ['begin', ...batch, 'commit']),
    ]);
  });
});

describe(`executorOf (${testDriver()})`, () => {
  it('a connection gives its own Executor, and an Executor is taken as it is', () => {
    expect(executorOf(t.db)).toBe(t.db.executor);
    const executor = queryExecutor(async () => []);
    expect(executorOf(executor)).toBe(executor);
  });

  it("a Drizzle transaction's Executor runs in it: rolled back with it", async () => {
    if (testDriver() === 'neon-http') {
      // No interactive transactions: statements join the caller's batch instead (prepareEnqueue).
      expect(executorOf(t.db.db).transaction).toBeUndefined();
      return;
    }
    const rolledBack = t.db.db.transaction(async (tx) => {
      await executorOf(tx).query(sql`insert into ${probe()} (n) values (3)`);
      expect((await executorOf(tx).query(sql`select count(*)::int as n from ${probe()}`))[0]).toEqual({ n: 1 });
      throw new Error('roll back');
    });
    await expect(rolledBack).rejects.toThrow('roll back');
    expect(await written()).toEqual([]);
  });

  it("what runs through a Drizzle database is heard too, as from no driver's connection", async () => {
    const { sent } = await captureStatements(testDriver(), () => executorOf(t.db.db).query(sql`select 5 as e`));
    expect(sent).toEqual([{ text: 'select 5 as e', driver: undefined }]);
  });
});
