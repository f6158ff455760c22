/**
 * Dev probe (issue 41): where a K = 1 run's wall time goes, warm, in one process. Under the lock:
 *   npx esbuild bench/probe-k1.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-k1.mjs --log-level=warning \
 *   && node .bench/probe-k1.mjs [TRIALS] [JOBS] [SYSTEMS]   (4, 50000, skiplock,raw-schema,graphile)
 *
 * Each trial runs every system once, in order (fresh database, setup, enqueueBulk, vacuum analyze,
 * then the measured window around process(1)); skiplock on one connection, batch 500, as the bench's
 * K = 1 row. Per run, µs per job: wall; Node's CPU (process.cpuUsage); the server's CPU (the run time
 * in /proc/<pid>/schedstat of every postgres process, so other clients of the server count too: hold
 * the lock); `out`, the wall time with at least one statement sent and its ReadyForQuery not yet
 * read (node-postgres's Client, patched: the statement's server time, both trips and the parse of
 * its answer); `gap` = wall − out, Node working with nothing sent. Statements per 1,000 jobs too.
 * The first trial is V8's warm-up: read the medians of the others.
 */
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { freshDatabase, vacuumAnalyze } from './db.js';
import { graphileSystem } from './systems/graphile.js';
import { rawSchemaSystem } from './systems/raw-schema.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem } from './systems/types.js';

const server = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TRIALS = Number(process.argv[2] ?? 4);
const JOBS = Number(process.argv[3] ?? 50_000);
const NAMES = (process.argv[4] ?? 'skiplock,raw-schema,graphile').split(',');
const BATCH = Number(process.env.PROBE_BATCH ?? 500);

// Outstanding statements across every Client of this process.
let active = 0;
let since = 0;
let outMs = 0;
let statements = 0;
// Per statement (its name, or its text's start): count and outstanding ms, when only one is out at a time.
const kinds = new Map<string, { n: number; ms: number }>();
let current = '';
type Patched = {
  _pulseQueryQueue(): void;
  _handleReadyForQuery(msg: unknown): void;
  _activeQuery: { name?: string; text?: string } | null;
};
const proto = pg.Client.prototype as unknown as Patched;
const pulse = proto._pulseQueryQueue;
const ready = proto._handleReadyForQuery;
const open = new WeakSet<object>();
proto._pulseQueryQueue = function (this: Patched) {
  pulse.call(this);
  if (this._activeQuery && !open.has(this)) {
    open.add(this);
    statements++;
    const q = this._activeQuery;
    current = q.name ? `${q.name}` : (q.text ?? '?').replace(/\s+/g, ' ').slice(0, 60);
    if (active++ === 0) since = performance.now();
  }
};
proto._handleReadyForQuery = function (this: Patched, msg: unknown) {
  if (open.has(this)) {
    open.delete(this);
    if (--active === 0) {
      const ms = performance.now() - since;
      outMs += ms;
      const k = kinds.get(current) ?? { n: 0, ms: 0 };
      k.n++;
      k.ms += ms;
      kinds.set(current, k);
    }
  }
  ready.call(this, msg);
};

/**
 * Nanoseconds of CPU of the postgres server: every live postgres process's utime + stime, plus the
 * postmaster's cutime + cstime (the backends that exited). In clock ticks (10 ms each).
 */
function serverNs(): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Fields from the 3rd: utime is the 14th (f[11]), stime f[12], cutime f[13], cstime f[14]; ppid f[1].
      ticks += Number(f[11]) + Number(f[12]);
      if (f[1] === '1' || readFileSync(`/proc/${f[1]}/comm`, 'utf8').trim() !== 'postgres')
        ticks += Number(f[13]) + Number(f[14]);
    } catch {}
  }
  return ticks * 1e7;
}

const make = (name: string): BenchSystem =>
  name === 'graphile'
    ? graphileSystem()
    : name === 'raw-schema'
      ? rawSchemaSystem(BATCH)
      : skiplockSystem(BATCH, 'keep', Number(name.split(':')[1] ?? 1));

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
const rows: Record<string, number[][]> = {};
for (let trial = 0; trial < TRIALS; trial++) {
  for (const name of NAMES) {
    const sys = make(name);
    const url = await freshDatabase(server, 'bench_probe');
    await sys.setup(url);
    await sys.enqueueBulk(JOBS, 1000);
    await vacuumAnalyze(url);
    const [s0, o0, n0, c0, t0] = [serverNs(), outMs, statements, process.cpuUsage(), performance.now()];
    kinds.clear();
    await sys.process(1);
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    const [s1, o1, n1] = [serverNs(), outMs, statements];
    await sys.teardown();
    const per = (ms: number) => (ms * 1000) / JOBS;
    const row = [
      JOBS / (wall / 1000),
      per(wall),
      (cpu.user + cpu.system) / JOBS,
      (s1 - s0) / 1000 / JOBS,
      per(o1 - o0),
      per(wall - (o1 - o0)),
      ((n1 - n0) * 1000) / JOBS,
    ];
    rows[name] = [...(rows[name] ?? []), row];
    if (process.env.PROBE_KINDS)
      for (const [k, v] of kinds) console.log(`   ${v.n}× ${(v.ms / v.n).toFixed(3)} ms  ${k}`);
    console.log(
      `trial ${trial} ${name.padEnd(12)} ${Math.round(row[0] as number)} jobs/s; µs/job wall ${row[1]?.toFixed(1)} node ${row[2]?.toFixed(1)} server ${row[3]?.toFixed(1)} out ${row[4]?.toFixed(1)} gap ${row[5]?.toFixed(1)}; statements/1000 ${row[6]?.toFixed(1)}`,
    );
  }
}
console.log('medians of trials 1.. (trial 0 is warm-up):');
for (const [name, r] of Object.entries(rows)) {
  const warm = r.length > 1 ? r.slice(1) : r;
  const col = (i: number) => median(warm.map((x) => x[i] as number));
  console.log(
    `${name.padEnd(12)} ${Math.round(col(0))} jobs/s; µs/job wall ${col(1).toFixed(1)} node ${col(2).toFixed(1)} server ${col(3).toFixed(1)} out ${col(4).toFixed(1)} gap ${col(5).toFixed(1)}; statements/1000 ${col(6).toFixed(1)}`,
  );
}
process.exit(0);
