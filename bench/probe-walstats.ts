/**
 * Dev probe: the LSN range of one lifecycle run (`node .bench/probe-walstats.mjs N [keep|delete|raw-schema] [K]`:
 * skiplock in either mode, or the raw floor on skiplock's table), for pg_waldump --stats.
 */
import { freshDatabase, withClient } from './db.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10000);
const mode = process.argv[3] ?? 'keep';
const sys = mode === 'raw-schema' ? rawSchemaSystem(500) : skiplockSystem(500, mode === 'delete' ? 'delete' : 'keep');
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
