// Enqueue inside the transaction of other Postgres clients (docs/kinds-and-enqueue.md).
import { CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import postgres from 'postgres';
import { deliverWebhook } from './jobs.js';

const url = process.env.DATABASE_URL!;
const payload = { url: 'https://partner.example/hooks', eventId: 'order-7', body: {} };

// #region pg-client
import { enqueue, queryExecutor } from 'skiplock';

const pool = new pg.Pool({ connectionString: url });
const client = await pool.connect();
try {
  await client.query('begin');
  await client.query('insert into orders (total) values ($1)', [42]);
  await enqueue(
    queryExecutor((text, params) => client.query(text, params)),
    deliverWebhook,
    payload,
  );
  await client.query('commit');
} catch (err) {
  await client.query('rollback');
  throw err;
} finally {
  client.release();
}
// #endregion pg-client

// #region postgres-js
const sql = postgres(url);
await sql.begin(async (tx) => {
  await tx`insert into orders (total) values (${42})`;
  await enqueue(
    queryExecutor((text, params) => tx.unsafe(text, params as postgres.ParameterOrJSON<never>[])),
    deliverWebhook,
    payload,
  );
});
// #endregion postgres-js

// #region kysely
const db = new Kysely<{ orders: { total: number } }>({ dialect: new PostgresDialect({ pool }) });
await db.transaction().execute(async (trx) => {
  await trx.insertInto('orders').values({ total: 42 }).execute();
  await enqueue(
    queryExecutor((text, params) => trx.executeQuery(CompiledQuery.raw(text, params))),
    deliverWebhook,
    payload,
  );
});
// #endregion kysely
