/** Dev probe: the LSN range of one skiplock lifecycle run (`node .bench/probe-walstats.mjs N [keep|delete] [K]`), for pg_waldump --stats. */
import { freshDatabase, withClient } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10000);
const sys = skiplockSystem(500, process.argv[3] === 'delete' ? 'delete' : 'keep');
const url = await freshDatabase(server, 'bench_probe');
await sys.setup(url);
await withClient(url, (c) => c.query('checkpoint'));
const a = await withClient(
  url,
  async (c) => (await c.query('select pg_walfile_name(pg_current_wal_lsn()) f, pg_current_wal_lsn() l')).rows[0],
);
await sys.enqueueBulk(N, 1000);
const m = await withClient(url, async (c) => (await c.query('select pg_current_wal_lsn() l')).rows[0]);
await sys.process(Number(process.argv[4] ?? 4));
const b = await withClient(url, async (c) => (await c.query('select pg_current_wal_lsn() l')).rows[0]);
console.log(a.l, m.l, b.l);
await sys.teardown();
process.exit(0);
