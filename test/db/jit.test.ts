import { sql } from 'drizzle-orm';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SkiplockDb } from '../../db/connect.js';
import { queryHotRows, queryRows } from '../../db/execute.js';
import { databaseUrl, openAdminPool, openDb, testDriver } from '../helpers/db.js';

// A claim over a large backlog is estimated above jit_above_cost; compiling it took 409 ms for a
// statement that runs in ~50 ms (docs/performance.md, "Why JIT is off"). The hot statements (claim, settle) must run with JIT off on
// every driver without a manual step — neon-http included, which has no session to set it on. A
// database of its own, where every statement would be compiled, shows whether they are.
const database = `skiplock_jit_${testDriver().replace('-', '_')}_${process.pid}`;
let server: pg.Pool;
let db: SkiplockDb;

beforeAll(async () => {
  server = openAdminPool(databaseUrl(), 1);
  await server.query(`drop database if exists ${database} with (force)`);
  await server.query(`create database ${database}`);
  await server.query(`alter database ${database} set jit = on`);
  await server.query(`alter database ${database} set jit_above_cost = 0`);
  const url = new URL(databaseUrl());
  url.pathname = `/${database}`;
  db = openDb({ connectionString: url.toString() });
});
afterAll(async () => {
  await db?.close();
  await server.query(`drop database if exists ${database} with (force)`);
  await server.end();
});

/** Whether EXPLAIN ANALYZE of a statement, sent as `send` sends it, reports JIT compilation. */
async function compiled(send: typeof queryRows): Promise<boolean> {
  const [row] = await send<{ 'QUERY PLAN': unknown }>(
    db.executor,
    sql`explain (analyze, format json) select sum(g) from generate_series(1, 1000) g`,
    'skiplock',
  );
  const plan = row?.['QUERY PLAN'];
  const text = typeof plan === 'string' ? plan : JSON.stringify(plan);
  return /"JIT"/.test(text);
}

describe(`JIT for the hot statements (${testDriver()})`, () => {
  it('a claim or settle is never JIT-compiled, whatever the database says', async () => {
    expect(await compiled(queryHotRows)).toBe(false);
  });

  it('(the database here would compile it: neon-http has no session that turned it off)', async () => {
    // pg and neon-ws turn JIT off for the whole session when they connect.
    expect(await compiled(queryRows)).toBe(testDriver() === 'neon-http');
  });
});
