/** Dev probe: WAL record statistics of one lifecycle run; feed the printed LSNs to pg_waldump --stats. */
/** Dev probe: prints the LSN range of one skiplock lifecycle run, for pg_waldump --stats. */
import { freshDatabase, withClient } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10000);
const sys = skiplockSystem(500);
const url = await freshDatabase(server, 'bench_probe');
await sys.setup(url);
await withClient(url, (c) => c.query('checkpoint'));
const a = await withClient(
  url,
  async (c) => (await c.query('select pg_walfile_name(pg_current_wal_lsn()) f, pg_current_wal_lsn() l')).rows[0],
);
await sys.enqueueBulk(N, 1000);
const m = await withClient(url, async (c) => (await c.query('select pg_current_wal_lsn() l')).rows[0]);
await sys.process(4);
const b = await withClient(url, async (c) => (await c.query('select pg_current_wal_lsn() l')).rows[0]);
console.log(a.l, m.l, b.l);
await sys.teardown();
process.exit(0);
