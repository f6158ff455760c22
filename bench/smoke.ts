import { freshDatabase, vacuumAnalyze } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { pgBossSystem } from './systems/pgboss.js';
import { rawSystem } from './systems/raw.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const N = Number(process.argv[2] ?? 20000);
const K = Number(process.argv[3] ?? 4);
for (const make of [() => skiplockSystem(100), () => graphileSystem(), () => pgBossSystem(500), () => rawSystem(100)]) {
  const sys = make();
  const url = await freshDatabase(server, 'bench_smoke');
  await sys.setup(url);
  let t = performance.now();
  await sys.enqueueBulk(N, 1000);
  const bulk = N / ((performance.now() - t) / 1000);
  await vacuumAnalyze(url);
  t = performance.now();
  await sys.process(K);
  const proc = N / ((performance.now() - t) / 1000);
  console.log(sys.name, 'bulk', Math.round(bulk), 'process', Math.round(proc));
  await sys.teardown();
}
process.exit(0);
