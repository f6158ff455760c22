/**
 * Dev probe for issue 41: the flow phase's per-key case (bench/run.ts) for skiplock alone, with each
 * claim statement tallied at the driver: claims by shape, jobs per claim, short claims, invocations.
 * `npx tsx bench/probe-perkey-run.ts [K]`; PROBE_JOBS (20,000), PROBE_MODE (perKey | ordering | plain).
 */
import pg from 'pg';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { Flow } from './systems/types.js';

const k = Number(process.argv[2] ?? 4);
const jobs = Number(process.env.PROBE_JOBS ?? 20_000);
const mode = process.env.PROBE_MODE ?? 'perKey';
const flow: Flow | undefined =
  mode === 'perKey'
    ? { mode: 'perKey', keys: 1_000, perKey: 5 }
    : mode === 'ordering'
      ? { mode: 'ordering', keys: 1_000 }
      : undefined;
const tally = { statements: 0, claims: 0, limited: 0, jobs: 0, short: 0, empty: 0, ms: 0, invocations: 0 };
// Statements counted while the jobs are processed (not the setup's), the check's polling included.
let measuring = false;
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
const original = proto.query;
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0] as { text?: string };
  const text = typeof q === 'object' ? q?.text : typeof q === 'string' ? q : undefined;
  const result = original.apply(this, args);
  if (measuring) tally.statements++;
  if (text?.includes('insert into') && text.includes('invocations')) tally.invocations++;
  if (text?.includes('ready as') && result instanceof Promise) {
    const t = performance.now();
    result.then(
      (r: { rows: { jobs: unknown[] | null }[] }) => {
        const n = (r.rows[0]?.jobs ?? []).length;
        tally.ms += performance.now() - t;
        tally.claims++;
        if (text.includes('key_walk_a')) tally.limited++;
        tally.jobs += n;
        if (n === 0) tally.empty++;
        else if (n < 500) tally.short++;
      },
      () => {},
    );
  }
  return result;
};
const system = skiplockSystem(500, 'keep', 1, flow);
const url = await freshDatabase('postgres://postgres@127.0.0.1:5432/postgres', 'bench_probe_perkey_run');
await system.setup(url);
await system.enqueueBulk(jobs, 1000);
await vacuumAnalyze(url);
measuring = true;
const t = performance.now();
const cpu = process.cpuUsage();
await system.process(k);
const ms = performance.now() - t;
const used = process.cpuUsage(cpu);
await system.teardown();
console.log(
  `${mode} K=${k}: ${Math.round(jobs / (ms / 1000))} jobs/s; claims ${tally.claims} (limited ${tally.limited}), jobs/claim ${(tally.jobs / tally.claims).toFixed(1)}, short ${tally.short}, empty ${tally.empty}, ms/claim ${(tally.ms / tally.claims).toFixed(1)}, invocations ${tally.invocations}, statements/job ${(tally.statements / jobs).toFixed(3)}, Node CPU ${((used.user + used.system) / jobs).toFixed(1)} µs/job`,
);
