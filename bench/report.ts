import { writeFileSync } from 'node:fs';
import { CONNECT_DEFAULTS } from '../db/connection-options.js';
import { type BatchHandlerFigures, batchHandlerSection } from './batch-handler.js';
import { eventsSection } from './events.js';
import { type BySystem, DELETE_MODE, figure, fmt, ratio } from './report-format.js';
import { issue25Section } from './report-issue25.js';
import { RESULT_FILES, resultPath, writeResult } from './results.js';
import { type ScheduleTickResult, scheduleTickSection } from './schedule-tick.js';
import type { SoakResult } from './soak.js';

/**
 * What `npm run bench` records in bench/RESULTS.json (and prints with `--json`): the run's date,
 * machine, parameters and each system's settings, beside the figures of every phase under their
 * own keys (`process_k4`, `flow_k4`, `events_publish`, …). RESULTS.md is rendered from it.
 */
export interface BenchRecord extends Record<string, unknown> {
  /** YYYY-MM-DD (UTC). */
  date: string;
  duration_s: number;
  quick: boolean;
  machine: { cores: number; memoryGiB: number; postgres: string; node: string };
  /** The peers' versions, as installed for the run. */
  versions: Record<string, string>;
  params: Record<string, number>;
  settings: Record<string, unknown>;
}
/** The keys of a record that describe the run rather than measure it. */
const RUN_KEYS = ['date', 'duration_s', 'quick', 'machine', 'versions', 'params', 'settings'] as const;

/** Claim latency in ms, as run.ts's phase 4 records it under `claim_latency_ms`. */
type Latency = { p50: number; p99: number };
type ClaimLatencies = { empty: Latency; finished: Latency; queued: Latency };
const SYSTEMS = ['skiplock', 'graphile-worker', 'pg-boss'] as const;

/**
 * Writes a run: bench/RESULTS.json, the page rendered from it (bench/RESULTS.md) and the chart of
 * phase 2 (bench/process.svg); a soak measured in the run also goes to bench/RESULTS.soak.json. A
 * `--quick` run writes the `.quick` siblings, which are not committed.
 */
export function writeReport(record: BenchRecord): string[] {
  const suffix = record.quick ? '.quick' : '';
  const written = [resultPath('bench', record.quick), `bench/RESULTS${suffix}.md`, `bench/process${suffix}.svg`];
  writeResult(written[0] as string, record);
  writeFileSync(written[1] as string, renderResultsPage(record));
  writeFileSync(written[2] as string, chart(record));
  if (record.soak) {
    const soak = resultPath('soak', record.quick);
    writeResult(soak, soakRecord(record));
    written.push(soak);
  }
  return written;
}

/** bench/RESULTS.soak.json: the soak of a run, with the run's date and machine. */
export function soakRecord(record: Pick<BenchRecord, 'date' | 'machine' | 'quick'> & { soak?: unknown }) {
  return { date: record.date, quick: record.quick, machine: record.machine, ...(record.soak as object) };
}

/** bench/RESULTS.md: tables with absolute figures and ratios, rendered from the run's record. */
type NodeCpu = Record<string, Record<string, number>>;
/** Node's CPU per job in the processing runs (the bench, client and peers share one process). */
function nodeCpuLine(cpu: NodeCpu | undefined): string {
  const k4 = cpu?.k4;
  if (!k4) return '';
  const floor = k4['raw (skiplock schema)'];
  const others = Object.entries(cpu ?? {})
    .filter(([key]) => key !== 'k4')
    .map(([key, v]) => `K = ${key.slice(1)}: skiplock ${v.skiplock} µs, graphile-worker ${v['graphile-worker']} µs`)
    .join('; ');
  return `
Node's CPU per job while processing (user + system, the whole bench process, median of the reps): at K = 4 skiplock ${k4.skiplock} µs, its delete mode ${k4['skiplock (delete)']} µs, graphile-worker ${k4['graphile-worker']} µs, pg-boss ${k4['pg-boss']} µs; the minimal SQL on skiplock's table ${floor} µs, so skiplock spends ${ratio(k4.skiplock, floor)} of the floor's.${others ? ` ${others}.` : ''}
`;
}

export function renderResultsPage(record: BenchRecord): string {
  const r: Record<string, unknown> = Object.fromEntries(
    Object.entries(record).filter(([key]) => !(RUN_KEYS as readonly string[]).includes(key)),
  );
  const input = { ...record, durationS: record.duration_s };
  const rows = (key: string, label: string, unit = 'jobs/s') => {
    const v = r[key] as BySystem;
    return `| ${label} | ${SYSTEMS.map((s) => fmt(v?.[s])).join(' | ')} | ${ratio(v?.skiplock, v?.['graphile-worker'])} | ${ratio(v?.skiplock, v?.['pg-boss'])} | ${unit} |`;
  };
  const floor = r.raw_floor_k4 as number;
  const k4 = (r.process_k4 as BySystem)?.skiplock;
  const scale = r.claim_latency_ms as ClaimLatencies | undefined;
  const wal = r.wal_bytes_per_job as BySystem;
  const rt = r.round_trips_per_job as Record<string, number>;
  const cold = r.cold_import_ms as { worker: number; bare: number };
  const at = (k: string, s: string) => figure(r, k, s);
  const deleteFloor = r.raw_floor_delete_k4 as number;
  const floor16 = r.raw_floor_k16 as number | undefined;
  const schemaFloor = r.raw_schema_floor_k4 as number | undefined;
  const deleteWal = (r.skiplock_delete as BySystem | undefined)?.wal_bytes_per_job;
  const graphile4 = at('k4', 'graphile-worker');
  const pgboss4 = Math.max(at('k4', 'pg-boss') ?? 0, (r.pgboss_batch100_k4 as number) ?? 0);
  const yes = (ok: boolean) => (ok ? 'yes' : 'no');
  // Delete mode: ≤ graphile-worker; keep mode: ≤ 1.15× (issue 25), beside the UPDATE floor on skiplock's own table.
  const walTarget = (mode: string, walValue: number | undefined) => {
    const keep = mode === 'skiplock';
    const most = (keep ? 1.15 : 1) * (wal?.['graphile-worker'] ?? 0);
    const floorNote = keep
      ? `; the raw floor on skiplock's table: ${fmt(r.wal_raw_schema_bytes_per_job as number)}; skiplock with fillfactor 30, docs/performance.md's trade of heap for WAL: ${fmt(r.wal_fillfactor_30_bytes_per_job as number)} (${ratio(r.wal_fillfactor_30_bytes_per_job as number, wal?.['graphile-worker'])})`
      : '';
    return `| ${mode}: WAL per lifecycle ≤ ${keep ? '1.15× ' : ''}graphile-worker | ${fmt(walValue)} vs ${fmt(wal?.['graphile-worker'])} bytes (${ratio(walValue, wal?.['graphile-worker'])}${floorNote}) | ${yes((walValue ?? Infinity) <= most)} |`;
  };
  const targets = (mode: string, floorValue: number, floorName: string, walValue: number | undefined) => {
    const k4s = at('k4', mode) ?? 0;
    const k16s = at('k16', mode) ?? 0;
    return [
      `| ${mode}: K = 4 ≥ 1.3× graphile-worker | ${ratio(k4s, graphile4)} (${fmt(k4s)} vs ${fmt(graphile4)}) | ${yes(k4s >= 1.3 * (graphile4 ?? 0))} |`,
      `| ${mode}: K = 4 ≥ 2× pg-boss at its best batch size | ${ratio(k4s, pgboss4)} (vs ${fmt(pgboss4)}) | ${yes(k4s >= 2 * pgboss4)} |`,
      `| ${mode}: K = 16 not below K = 4 | ${fmt(k16s)} vs ${fmt(k4s)} (${ratio(k16s, k4s)}; the raw floor: ${ratio(floor16, floor)}) | ${yes(k16s >= k4s)} |`,
      `| ${mode}: ≥ 80% of the raw floor (${floorName}) | ${floorValue ? Math.round((k4s / floorValue) * 100) : '–'}% of ${fmt(floorValue)} | ${yes(k4s >= 0.8 * floorValue)} |`,
      walTarget(mode, walValue),
    ].join('\n');
  };
  const common = [
    `| bulk enqueue ≥ graphile-worker addJobs | ${ratio((r.enqueue_bulk as BySystem)?.skiplock, (r.enqueue_bulk as BySystem)?.['graphile-worker'])} | ${yes(((r.enqueue_bulk as BySystem)?.skiplock ?? 0) >= ((r.enqueue_bulk as BySystem)?.['graphile-worker'] ?? 0))} |`,
    `| ≤ 2 round trips per batch, constant in the batch size | statements per job ${rt?.['1']} / ${rt?.['10']} / ${rt?.['100']} at batch 1 / 10 / 100 | ${yes((rt?.['100'] ?? 1) * 100 <= 2 && (rt?.['1'] ?? 9) <= 2)} |`,
    `| claim p99 with ${fmt(input.params.finishedRows)} finished rows ≤ 1.5× empty | ${scale?.finished.p99} vs ${scale?.empty.p99} ms | ${yes((scale?.finished.p99 ?? 0) <= 1.5 * (scale?.empty.p99 ?? 0))} |`,
  ].join('\n');
  return `# Benchmark results

Written by \`npm run bench\` from [RESULTS.json](RESULTS.json), which holds every figure below.
Run: ${input.date}${input.quick ? ' (`--quick`)' : ''}, ${input.durationS} s.
Machine: ${input.machine.cores} cores, ${input.machine.memoryGiB} GiB, PostgreSQL ${input.machine.postgres}, Node ${input.machine.node}; client and server on the same machine.
Peers: ${Object.entries(input.versions)
    .map(([name, version]) => `${name} ${version}`)
    .join(', ')}.
Each figure is the median of ${input.params.reps} repetitions${input.params.processReps ? ` (processing: ${input.params.processReps})` : ''}, systems alternating; every system gets a fresh database, vacuumed and analysed before processing.
Parameters: ${Object.entries(input.params)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ')}.

## Throughput

| phase | skiplock | graphile-worker | pg-boss | skiplock ÷ graphile | skiplock ÷ pg-boss | unit |
| --- | --- | --- | --- | --- | --- | --- |
${rows('enqueue_single', 'enqueue, one job per transaction')}
${rows('enqueue_bulk', `enqueue, bulk (batches of ${input.params.bulkBatch})`)}
${rows('process_k1', 'process no-op jobs, K = 1')}
${rows('process_k4', 'process no-op jobs, K = 4')}
${rows('process_k16', 'process no-op jobs, K = 16')}

skiplock with \`completedJobs: 'delete'\` (completed rows deleted as they complete, as graphile-worker does; counted per minute for the stats): K = 1 ${fmt(at('k1', DELETE_MODE))}, K = 4 ${fmt(at('k4', DELETE_MODE))}, K = 16 ${fmt(at('k16', DELETE_MODE))} jobs/s — ${ratio(at('k4', DELETE_MODE), graphile4)} graphile-worker and ${ratio(at('k4', DELETE_MODE), deleteFloor)} of the DELETE floor at K = 4.

skiplock at K = 1 on the default pool (${CONNECT_DEFAULTS.max} connections, what a deployed worker gets; a batch's settle then runs beside the next claim): ${fmt(r.skiplock_default_pool_k1 as number)} jobs/s, ${ratio(r.skiplock_default_pool_k1 as number, at('k1', 'graphile-worker'))} graphile-worker, against ${fmt(at('k1', 'skiplock'))} on one connection as in the table.

pg-boss at K = 4 with batchSize 100: ${fmt(r.pgboss_batch100_k4 as number)} jobs/s (the table uses batchSize 500, its better setting here).

Raw-SQL floor at K = 4 (the same state changes with the least SQL, batch ${(input.settings.raw as { batch: number }).batch}): completion as UPDATE ${fmt(floor)} jobs/s, as DELETE ${fmt(r.raw_floor_delete_k4 as number)} jobs/s. skiplock ÷ floor (UPDATE, its default completion mode): ${ratio(k4, floor)}. The same minimal SQL on skiplock's own table (its indexes and CHECKs, the columns skiplock writes, the completion fenced on the token): ${fmt(schemaFloor)} jobs/s, ${ratio(schemaFloor, floor)} of the bare floor (what the schema costs); skiplock runs at ${ratio(k4, schemaFloor)} of it (what the library's statement shape and Node cost). The UPDATE floor at K = 16: ${fmt(floor16)} jobs/s (${ratio(floor16, floor)} of its K = 4) — what 16 independent SKIP LOCKED claimers cost with no library at all.
${nodeCpuLine(r.node_us_per_job as NodeCpu | undefined)}
${flowSection(r)}${eventsSection(r)}${r.soak ? soakSection(r.soak as Record<string, SoakResult>) : ''}${r.batch_handler ? batchHandlerSection(r.batch_handler as BatchHandlerFigures) : ''}${r.schedule_tick ? scheduleTickSection(r.schedule_tick as ScheduleTickResult) : ''}
## Round trips, scale, WAL, cold start

- Statements per job at batch sizes 1 / 10 / 100 (counted at the driver): ${rt?.['1']} / ${rt?.['10']} / ${rt?.['100']} — one claim-and-settle statement per batch in steady state (above 128 outcomes the settle goes first in a statement of its own: two per batch).
- Claim latency (claim 10, settling the previous 10), ms p50 / p99: empty table ${scale?.empty.p50} / ${scale?.empty.p99}; with ${fmt(input.params.finishedRows)} completed and dead rows ${scale?.finished.p50} / ${scale?.finished.p99}; with ${fmt(input.params.queuedRows)} queued jobs ${scale?.queued.p50} / ${scale?.queued.p99}.
- WAL per job lifecycle (enqueue → claim → complete), bytes: skiplock ${fmt(wal?.skiplock)} (delete mode ${fmt(deleteWal)}), graphile-worker ${fmt(wal?.['graphile-worker'])}, pg-boss ${fmt(wal?.['pg-boss'])}, raw ${fmt(r.wal_raw_bytes_per_job as number)} (update) / ${fmt(r.wal_raw_delete_bytes_per_job as number)} (delete); the raw UPDATE floor on skiplock's own table (its indexes and row, the columns skiplock writes) ${fmt(r.wal_raw_schema_bytes_per_job as number)}; skiplock in keep mode with \`fillfactor = 30\` on jobs (nearly every update stays on its page; ~46 % more heap for the rows keep mode retains: bench/history.md item 32) ${fmt(r.wal_fillfactor_30_bytes_per_job as number)}.
- Worker bundle ${fmt(r.bundle_bytes as number)} bytes (minified ESM, pg driver, SDK external); median cold import ${cold?.worker} ms vs ${cold?.bare} ms for a bare handler.

## Against the targets of issue 5 (this run)

The first round's targets, kept to compare runs over time; issue 25's targets, in the next table, replace them where the two differ (delete mode ≥ 1.5×, not 1.3×; keep-mode WAL against the floor on skiplock's own table).

| target | result | met |
| --- | --- | --- |
${targets('skiplock', floor, 'UPDATE completion', wal?.skiplock)}
${targets(DELETE_MODE, deleteFloor, 'DELETE completion', deleteWal)}
${common}

${issue25Section(r)}

## Settings

\`\`\`json
${JSON.stringify(input.settings, null, 2)}
\`\`\`

Elsewhere: durable steps beside DBOS Transact in [RESULTS.steps.md](RESULTS.steps.md) (\`npm run bench:steps\`); nudges, bursts and K = 1..32 in [RESULTS.serverless.md](RESULTS.serverless.md) (\`npm run bench:serverless\`); the claims while VACUUM lags of the last run with \`--soak\` in [${RESULT_FILES.soak.replace('bench/', '')}](${RESULT_FILES.soak.replace('bench/', '')}); what was changed in the engine and measured on the way, run by run, in [history.md](history.md).
`;
}

/** Phase 8 (issue 12): ordering keys and a per-key limit beside each peer's nearest mechanism. */
function flowSection(r: Record<string, unknown>): string {
  const flow = r.flow_k4 as
    | { keys: number; per_key: number; ordering?: BySystem; per_key_limit?: BySystem }
    | undefined;
  if (!flow) return '';
  const plain = (r.process_k4 as BySystem | undefined)?.skiplock;
  const row = (label: string, v: BySystem | undefined) =>
    `| ${label} | ${SYSTEMS.map((s) => fmt(v?.[s])).join(' | ')} | ${ratio(v?.skiplock, v?.['graphile-worker'])} | ${ratio(v?.skiplock, v?.['pg-boss'])} | ${ratio(v?.skiplock, plain)} |`;
  return `## Flow control (K = 4)

Every job carries one of ${fmt(flow.keys)} keys (round robin). **Ordering**: at most one running job per key, in enqueue order — skiplock \`orderingKey\`, graphile-worker named queues (\`queueName\`), pg-boss a \`key_strict_fifo\` queue with a \`singletonKey\` per job. **Per-key limit**: at most ${flow.per_key} running per key across every worker — skiplock \`keyConcurrency\` with a \`concurrencyKey\`, pg-boss \`group\` with \`groupConcurrency\` (its database-tracked, cross-node limit); graphile-worker has no limit above one per key (–). The last column compares with skiplock's own K = 4 row above, which uses neither.

| jobs/s | skiplock | graphile-worker | pg-boss | skiplock ÷ graphile | skiplock ÷ pg-boss | ÷ skiplock without keys |
| --- | --- | --- | --- | --- | --- | --- |
${row(`${fmt(flow.keys)} ordering keys`, flow.ordering)}
${row(`${fmt(flow.keys)} keys, ${flow.per_key} running per key`, flow.per_key_limit)}
`;
}

/** Jobs/s at `k` ('k4') for a system, delete mode included (kept under `skiplock_delete`). */
function chart(r: Record<string, unknown>): string {
  const ks = ['k1', 'k4', 'k16'];
  const colors: Record<string, string> = {
    skiplock: '#2b6cb0',
    [DELETE_MODE]: '#63b3ed',
    'graphile-worker': '#38a169',
    'pg-boss': '#d69e2e',
  };
  const SERIES = ['skiplock', DELETE_MODE, 'graphile-worker', 'pg-boss'];
  const values = ks.flatMap((k) => SERIES.map((s) => figure(r, k, s) ?? 0));
  const max = Math.max(...values, 1);
  const width = 640;
  const height = 320;
  const groupWidth = (width - 80) / ks.length;
  const barWidth = groupWidth / (SERIES.length + 1);
  const bars = ks
    .map((k, g) =>
      SERIES.map((s, i) => {
        const v = figure(r, k, s) ?? 0;
        const h = (v / max) * (height - 80);
        const x = 60 + g * groupWidth + i * barWidth;
        const y = height - 40 - h;
        return `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(barWidth - 4).toFixed(1)}" height="${h.toFixed(1)}" fill="${colors[s]}"/><text x="${(x + barWidth / 2 - 2).toFixed(1)}" y="${(y - 4).toFixed(1)}" font-size="10" text-anchor="middle">${Math.round(v / 100) / 10}k</text>`;
      }).join(''),
    )
    .join('');
  const labels = ks
    .map(
      (k, g) =>
        `<text x="${(60 + g * groupWidth + (groupWidth - barWidth) / 2).toFixed(1)}" y="${height - 20}" font-size="12" text-anchor="middle">K = ${k.slice(1)}</text>`,
    )
    .join('');
  const legend = SERIES.map(
    (s, i) =>
      `<rect x="${60 + i * 145}" y="10" width="12" height="12" fill="${colors[s]}"/><text x="${76 + i * 145}" y="20" font-size="12">${s}</text>`,
  ).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<title>No-op jobs processed per second at K = 1, 4 and 16 concurrent workers</title>
<rect width="100%" height="100%" fill="white"/>${legend}
<text x="10" y="${height / 2}" font-size="12" transform="rotate(-90 10 ${height / 2})">jobs / s</text>
<line x1="55" y1="${height - 40}" x2="${width - 10}" y2="${height - 40}" stroke="#333"/>${bars}${labels}
</svg>
`;
}

/** Phase 9: claims while VACUUM lags, a row per period (a minute; 30 s with --quick) for each completion mode. */
export function soakSection(soak: Record<string, SoakResult>): string {
  const modes = Object.entries(soak);
  const summary = modes
    .map(
      ([mode, s]) =>
        `${mode}: claim p50 ${s.claim_p50_ms_unvacuumed} ms after the minutes without VACUUM against ${s.claim_p50_ms_vacuumed} ms after one (${s.claim_p50_ms_vacuumed ? (s.claim_p50_ms_unvacuumed / s.claim_p50_ms_vacuumed).toFixed(2) : '–'}×; target ≤ 1.5×), ${s.entries_per_claim_unvacuumed} lease-index entries per claim, ${s.jobs_per_s} jobs/s`,
    )
    .join('; ');
  const rows = modes
    .flatMap(([mode, s]) =>
      s.per_period.map(
        (m) =>
          `| ${mode} | ${m.at_s} | ${m.vacuumed ? 'after VACUUM' : 'none since start'} | ${m.claims} | ${m.claim_p50_ms} | ${m.entries_per_claim} | ${m.jobs} |`,
      ),
    )
    .join('\n');
  return `## Soak: claims while VACUUM lags

A steady load (enqueue at a fixed rate, two claim-and-settle loops, batches of 10, leases of 10 s) with the table's autovacuum off, then one VACUUM; a row per minute (30 s with \`--quick\`), \`s\` counted from the start of the load. Every finished job leaves a dead entry in the lease index, which the claim's rescue looks through once its lease time has passed; the claim must not slow down with them (bench/soak.ts). ${summary}.

| mode | s | vacuum | claims | claim p50, ms | lease-index entries per claim | jobs |
| --- | --- | --- | --- | --- | --- | --- |
${rows}
`;
}
