/**
 * Dev probe: processing throughput of one system
 * (`node .bench/probe.mjs N K BATCH [skiplock|raw|raw-delete|raw-schema|graphile|skiplock-delete] [CONNECTIONS]`;
 * CONNECTIONS: skiplock's pool per loop, 1 by default as in the bench's table). Env: PROBE_SQL (run once after
 * setup), PROBE_PROF (a V8 CPU profile of the processing), PROBE_PERF (`perf record -a -g` of it).
 */
import os from 'node:os';
import { startCpuProfile } from './cpu-profile.js';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { rawSystem } from './systems/raw.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const [N, K, B] = [Number(process.argv[2] ?? 20000), Number(process.argv[3] ?? 4), Number(process.argv[4] ?? 200)];
const which = process.argv[5] ?? 'skiplock';
const connections = Number(process.argv[6] ?? 1);
const sys =
  which === 'raw'
    ? rawSystem(B, 'update')
    : which === 'raw-schema'
      ? rawSchemaSystem(B)
      : which === 'raw-delete'
        ? rawSystem(B, 'delete')
        : which === 'graphile'
          ? graphileSystem()
          : which === 'skiplock-delete'
            ? skiplockSystem(B, 'delete', connections)
            : skiplockSystem(B, 'keep', connections);
const busy = () => os.cpus().reduce((s, c) => s + c.times.user + c.times.nice + c.times.sys + c.times.irq, 0);
const url = await freshDatabase(server, 'bench_probe');
await sys.setup(url);
if (process.env.PROBE_SQL) {
  const { default: pg } = await import('pg');
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  await c.query(process.env.PROBE_SQL);
  await c.end();
}
await sys.enqueueBulk(N, 1000);
await vacuumAnalyze(url);
const cpu0 = process.cpuUsage();
const busy0 = busy();
const stopProfile = await startCpuProfile();
// PROBE_PERF=<file>: `perf record` of the whole machine while the jobs are processed (not the enqueue).
const perf = process.env.PROBE_PERF
  ? (await import('node:child_process')).spawn(
      'perf',
      ['record', '-F', '1999', '-a', '-g', '-o', process.env.PROBE_PERF],
      {
        stdio: 'ignore',
      },
    )
  : undefined;
if (perf) await new Promise((resolve) => setTimeout(resolve, 500)); // perf starts sampling
const t = performance.now();
await sys.process(K);
if (perf) {
  perf.kill('SIGINT');
  await new Promise((resolve) => perf.once('exit', resolve));
}
await stopProfile();
const secs = (performance.now() - t) / 1000;
const cpu = process.cpuUsage(cpu0);
const nodeUs = (cpu.user + cpu.system) / N;
const totalUs = ((busy() - busy0) * 1000) / N;
console.log(
  `${which} K=${K} B=${B}${connections > 1 ? ` pool=${connections}` : ''}:`,
  Math.round(N / secs),
  `jobs/s; per job: node ${nodeUs.toFixed(1)} µs (sys ${(cpu.system / N).toFixed(1)}), rest (postgres) ${(totalUs - nodeUs).toFixed(1)} µs`,
);
await sys.teardown();
process.exit(0);
