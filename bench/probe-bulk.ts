/**
 * Dev probe: bulk enqueue alone, skiplock or graphile-worker (`node .bench/probe-bulk.mjs
 * [skiplock|graphile] [N]`): N jobs in batches of 1,000 into a fresh database, after 5,000 to warm
 * up, with the CPU per job in Node and in the rest of the machine (Postgres).
 */
import os from 'node:os';
import { freshDatabase } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { skiplockSystem } from './systems/skiplock.js';

const which = process.argv[2] ?? 'skiplock';
const N = Number(process.argv[3] ?? 100_000);
const sys = which === 'graphile' ? graphileSystem() : skiplockSystem(500, 'keep', 1);
const busy = () => os.cpus().reduce((s, c) => s + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0);
const url = await freshDatabase('postgres://postgres@127.0.0.1:5432/postgres', 'bench_probe');
await sys.setup(url);
await sys.enqueueBulk(5_000, 1_000);
const cpu0 = process.cpuUsage();
const busy0 = busy();
const t = performance.now();
await sys.enqueueBulk(N, 1_000);
const secs = (performance.now() - t) / 1000;
const cpu = process.cpuUsage(cpu0);
const nodeUs = (cpu.user + cpu.system) / N;
const totalUs = ((busy() - busy0) * 1000) / N;
console.log(
  `${which} bulk: ${Math.round(N / secs)} jobs/s; per job: node ${nodeUs.toFixed(1)} µs, rest (postgres) ${(totalUs - nodeUs).toFixed(1)} µs`,
);
await sys.teardown();
process.exit(0);
