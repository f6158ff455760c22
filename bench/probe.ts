/** Dev probe: processing throughput of skiplock alone (`node .bench/probe.mjs N K BATCH`). */
import { freshDatabase, vacuumAnalyze } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const [N, K, B] = [Number(process.argv[2] ?? 20000), Number(process.argv[3] ?? 4), Number(process.argv[4] ?? 200)];
const sys = skiplockSystem(B);
const url = await freshDatabase(server, 'bench_probe');
await sys.setup(url);
await sys.enqueueBulk(N, 1000);
await vacuumAnalyze(url);
const cpu0 = process.cpuUsage();
const t = performance.now();
await sys.process(K);
const secs = (performance.now() - t) / 1000;
const cpu = process.cpuUsage(cpu0);
console.log(
  `K=${K} B=${B}:`,
  Math.round(N / secs),
  'jobs/s; node cpu',
  Math.round(((cpu.user + cpu.system) / 1e6 / secs) * 100),
  '%',
);
await sys.teardown();
process.exit(0);
