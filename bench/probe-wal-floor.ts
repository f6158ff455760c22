/**
 * Dev probe: WAL bytes per job lifecycle of skiplock (keep, delete), its schema's floor and graphile-worker
 * (`node .bench/probe-wal-floor.mjs [N]`; PROBE_FILLFACTOR=F sets skiplock.jobs' fillfactor before the enqueue).
 */
import { freshDatabase, walBytes, withClient } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 10000);
const systems: [string, () => BenchSystem][] = [
  ['skiplock', () => skiplockSystem(500)],
  ['skiplock (delete)', () => skiplockSystem(500, 'delete')],
  ['raw (skiplock schema)', () => rawSchemaSystem(500)],
  ['graphile-worker', () => graphileSystem()],
];
for (const [name, make] of systems) {
  const system = make();
  const url = await freshDatabase(server, 'bench_probe');
  await system.setup(url);
  const fillfactor = process.env.PROBE_FILLFACTOR;
  if (fillfactor && name !== 'graphile-worker')
    await withClient(url, (c) => c.query(`alter table skiplock.jobs set (fillfactor = ${Number(fillfactor)})`));
  const bytes = await walBytes(url, async () => {
    await system.enqueueBulk(N, 1000);
    await system.process(4);
  });
  console.log(name, Math.round(bytes / N));
  await system.teardown();
}
process.exit(0);
