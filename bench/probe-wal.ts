/** Dev probe: WAL bytes per job lifecycle for skiplock alone (`node .bench/probe-wal.mjs N`). */
import { freshDatabase, walBytes } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10000);
const sys = skiplockSystem(500, process.argv[3] === 'delete' ? 'delete' : 'keep');
const url = await freshDatabase(server, 'bench_probe');
await sys.setup(url);
const bytes = await walBytes(url, async () => {
  await sys.enqueueBulk(N, 1000);
  await sys.process(4);
});
console.log('WAL bytes per job', Math.round(bytes / N));
await sys.teardown();
process.exit(0);
