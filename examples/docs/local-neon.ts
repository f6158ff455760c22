// Neon's drivers against a local Postgres (development, tests): startLocalNeon() from skiplock/testing.

// #region start-local-neon
import { connect, migrate } from 'skiplock';
import { startLocalNeon } from 'skiplock/testing';

const local = await startLocalNeon(); // a WebSocket proxy and a SQL-over-HTTP endpoint on 127.0.0.1
const db = connect({
  connectionString: 'postgres://postgres@127.0.0.1:5432/test', // trust, md5 or password auth: not SCRAM
  driver: 'neon-ws', // or 'neon-http'
  neon: local.neon,
});
await migrate(db);
// … enqueue, run workers …
await db.close();
await local.close();
// #endregion start-local-neon
