/**
 * Dev probe (issue 41): where a K = 1 run's wall time goes, warm, in one process. Under the lock:
 *   npx esbuild bench/probe-k1.ts --bundle --platform=node --format=esm --target=node20 \
 *     --packages=external --outfile=.bench/probe-k1.mjs --log-level=warning \
 *   && node .bench/probe-k1.mjs [TRIALS] [JOBS] [SYSTEMS]   (4, 50000, skiplock,raw-schema,graphile)
 *
 * Each trial runs every system once, in order (fresh database, setup, enqueueBulk, vacuum analyze,
 * then the measured window around process(1)); skiplock on one connection, batch 500, as the bench's
 * K = 1 row (a system named `skiplock:N` gets a pool of N). Per run, µs per job: wall; Node's CPU
 * (process.cpuUsage); the server's CPU (every postgres process in /proc, exited backends through the
 * postmaster's cutime: other clients of the server count too, hold the lock), and of this process's
 * own backends alone (read as each connection ends); `out`, the wall time with at least one statement sent and its ReadyForQuery not yet
 * read (node-postgres's Client, patched: the statement's server time, both trips and the parse of
 * its answer); `gap` = wall − out, Node working with nothing sent. Statements per 1,000 jobs too.
 * The first trial is V8's warm-up: read the medians of the others. PROBE_KINDS=1: each statement's
 * count and mean outstanding ms; PROBE_LOG: see logDurations.
 */
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
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

/** CPU ns of one process (utime + stime), 0 when it is gone. */
function processNs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 1e7;
  } catch {
    return 0;
  }
}
// The backends of this process's own connections: their CPU is read as each Client ends (a backend's
// CPU is gone from /proc once it exits), less what it had when the window opened.
let ownNs = 0;
const live = new Map<{ processID?: number }, number>();
const clientProto = pg.Client.prototype as unknown as { end(...args: unknown[]): unknown; processID?: number };
const end = clientProto.end;
clientProto.end = function (this: { processID?: number }, ...args: unknown[]) {
  if (this.processID) {
    ownPids.add(this.processID);
    ownNs += processNs(this.processID) - (live.get(this) ?? 0);
    live.delete(this);
  }
  return end.apply(this, args);
};
const connect = (pg.Client.prototype as unknown as { connect(...args: unknown[]): unknown }).connect;
(pg.Client.prototype as unknown as { connect(...args: unknown[]): unknown }).connect = function (
  this: { processID?: number },
  ...args: unknown[]
) {
  live.set(this, 0);
  return connect.apply(this, args);
};

/**
 * PROBE_LOG=<the server's log file>: the run's database logs every statement's duration
 * (log_min_duration_statement = 0, no parameters), and the lines of this process's backends written
 * during the window are summed by phase (parse, bind, execute) and statement: the server's time inside
 * statements, against its CPU.
 */
const LOG = process.env.PROBE_LOG;
const ownPids = new Set<number>();
function logTail(from: number): string {
  const size = statSync(LOG as string).size;
  const fd = openSync(LOG as string, 'r');
  const buffer = Buffer.alloc(size - from);
  readSync(fd, buffer, 0, buffer.length, from);
  closeSync(fd);
  return buffer.toString('utf8');
}
function logDurations(text: string): Map<string, { n: number; ms: number }> {
  const sums = new Map<string, { n: number; ms: number }>();
  for (const m of text.matchAll(
    /\[(\d+)\] \S*@bench_probe LOG: {2}duration: ([\d.]+) ms {2}(parse|bind|execute|statement)( [^:]*)?:/g,
  )) {
    if (!ownPids.has(Number(m[1]))) continue;
    const key = `${m[3]}${(m[4] ?? '').replace(/<unnamed>/, '').trim() ? ` ${(m[4] ?? '').trim()}` : ''}`;
    const sum = sums.get(key) ?? { n: 0, ms: 0 };
    sum.n++;
    sum.ms += Number(m[2]);
    sums.set(key, sum);
  }
  return sums;
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
    if (LOG) {
      const admin = new pg.Client({ connectionString: server });
      await admin.connect();
      await admin.query(
        'alter database bench_probe set log_min_duration_statement = 0; alter database bench_probe set log_parameter_max_length = 0',
      );
      await admin.end();
    }
    const logFrom = LOG ? statSync(LOG).size : 0;
    for (const [client] of live) live.set(client, client.processID ? processNs(client.processID) : 0);
    const own0 = ownNs;
    const [s0, o0, n0, c0, t0] = [serverNs(), outMs, statements, process.cpuUsage(), performance.now()];
    kinds.clear();
    await sys.process(1);
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    const [s1, o1, n1] = [serverNs(), outMs, statements];
    // Backends still open (the system's setup pool): what they spent in the window.
    let openNs = 0;
    for (const [client, at] of live) {
      if (!client.processID) continue;
      ownPids.add(client.processID);
      openNs += processNs(client.processID) - at;
    }
    const own = (ownNs - own0 + openNs) / 1000 / JOBS;
    if (LOG) {
      let total = 0;
      const lines: string[] = [];
      for (const [k, v] of logDurations(logTail(logFrom))) {
        total += v.ms;
        if (v.ms * 1000 > JOBS * 0.1) lines.push(`   log ${k}: ${v.n}× ${((v.ms * 1000) / JOBS).toFixed(2)} µs/job`);
      }
      console.log(`   log: in statements ${((total * 1000) / JOBS).toFixed(1)} µs/job\n${lines.join('\n')}`);
    }
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
      own,
    ];
    rows[name] = [...(rows[name] ?? []), row];
    if (process.env.PROBE_KINDS)
      for (const [k, v] of kinds) console.log(`   ${v.n}× ${(v.ms / v.n).toFixed(3)} ms  ${k}`);
    console.log(
      `trial ${trial} ${name.padEnd(12)} ${Math.round(row[0] as number)} jobs/s; µs/job wall ${row[1]?.toFixed(1)} node ${row[2]?.toFixed(1)} server ${row[3]?.toFixed(1)} (own backends ${row[7]?.toFixed(1)}) out ${row[4]?.toFixed(1)} gap ${row[5]?.toFixed(1)}; statements/1000 ${row[6]?.toFixed(1)}`,
    );
  }
}
console.log('medians of trials 1.. (trial 0 is warm-up):');
for (const [name, r] of Object.entries(rows)) {
  const warm = r.length > 1 ? r.slice(1) : r;
  const col = (i: number) => median(warm.map((x) => x[i] as number));
  console.log(
    `${name.padEnd(12)} ${Math.round(col(0))} jobs/s; µs/job wall ${col(1).toFixed(1)} node ${col(2).toFixed(1)} server ${col(3).toFixed(1)} (own backends ${col(7).toFixed(1)}) out ${col(4).toFixed(1)} gap ${col(5).toFixed(1)}; statements/1000 ${col(6).toFixed(1)}`,
  );
}
process.exit(0);
