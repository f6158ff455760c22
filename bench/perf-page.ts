/**
 * The pages made from the committed bench JSON (bench/results.ts): bench/RESULTS*.md whole, and the
 * generated blocks of the docs — `<!-- name: source -->` … `<!-- /name -->` — of docs/performance.md,
 * docs/cost.md and docs/schedules.md. `npx tsx bench/perf-page.ts --write` rewrites them after a
 * bench run; test/unit/perf-figures.test.ts fails when a page is not what its JSON renders.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BatchHandlerFigures, ModeFigures } from './batch-handler.js';
import { costTables } from './cost-model.js';
import type { EventsPublishResult } from './events.js';
import { type IdleResults, idleDayTable } from './idle/table.js';
import { type BenchRecord, renderResultsPage } from './report.js';
import { type BySystem, fmt, ratio } from './report-format.js';
import { RESULT_FILES, readResults } from './results.js';
import { pgBossOwnPassRow, type ScheduleTickResult } from './schedule-tick.js';
import { renderServerlessPage, reportPath, type ServerlessReport } from './serverless/report.js';
import type { SoakResult } from './soak.js';
import type { Row } from './steps/measure.js';
import { renderStepsPage, type StepsRecord } from './steps/report.js';

export const PERF_PAGE_WRITE = 'npx tsx bench/perf-page.ts --write';
export const PERFORMANCE_PAGE = 'docs/performance.md';
const SERVERLESS_NOTES = 'bench/serverless/NOTES.md';

/** The committed records, typed as the benches write them. */
export interface Results {
  bench: BenchRecord;
  soak: { date: string; quick: boolean; machine: BenchRecord['machine'] } & Record<string, SoakResult>;
  serverless: ServerlessReport;
  steps: StepsRecord;
  idle: IdleResults;
}
export const loadResults = (root: string) => readResults(root) as unknown as Results;

interface DocBlock {
  page: string;
  /** What the block is made from, as its opening comment names it. */
  from: string;
  render: (r: Results) => string;
}

const ms = (n: number) => `${fmt(n)} ms`;
const times = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
const machineLine = (m: BenchRecord['machine']) =>
  `${m.cores} cores, ${m.memoryGiB} GiB, PostgreSQL ${m.postgres.split(' ')[0]}, Node ${m.node}`;

/** docs/performance.md: the last full run of `npm run bench` against graphile-worker, pg-boss and the floor. */
function fullRunBlock({ bench: r }: Results): string {
  const sys = (key: string) => r[key] as BySystem;
  const del = r.skiplock_delete as BySystem;
  const flow = r.flow_k4 as { keys: number; per_key: number; ordering: BySystem; per_key_limit: BySystem };
  const events = r.events_publish as EventsPublishResult;
  const wal = sys('wal_bytes_per_job');
  const row = (label: string, v: Partial<BySystem>, floor?: number) =>
    `| ${label} | ${fmt(v.skiplock)} | ${fmt(v['graphile-worker'])} | ${fmt(v['pg-boss'])} | ${fmt(floor)} | ${ratio(v.skiplock, v['graphile-worker'])} | ${ratio(v.skiplock, v['pg-boss'])} |`;
  const k4 = sys('process_k4');
  const tick = r.schedule_tick as ScheduleTickResult;
  const batch = r.batch_handler as BatchHandlerFigures;
  const latency = r.claim_latency_ms as Record<'empty' | 'finished', { p50: number; p99: number }>;
  const trips = r.round_trips_per_job as Record<string, number>;
  const cold = r.cold_import_ms as { worker: number; bare: number };
  const versions = r.versions as Record<string, string>;
  return [
    `\`npm run bench\`, ${r.date}, graphile-worker ${versions['graphile-worker']} and pg-boss ${versions['pg-boss']}: ${machineLine(r.machine)}, client and server on one machine. No-op jobs in batches of ${fmt((r.settings.raw as { batch: number }).batch)}; each figure is the median of ${r.params.reps} runs${r.params.processReps ? ` (${r.params.processReps} for processing)` : ''}, the systems alternating, each on a fresh database. K is how many claim at once, in each system's shape: for skiplock and the floor K invocations, each on its own connection, as K functions run; for graphile-worker one process of concurrency K fed by one fetcher; for pg-boss one process with K local workers.`,
    '',
    '| | skiplock | graphile-worker | pg-boss | floor | skiplock ÷ graphile-worker | skiplock ÷ pg-boss |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    row('enqueue, one job per transaction, jobs/s', sys('enqueue_single')),
    row(`enqueue in bulk (${fmt(r.params.bulkBatch)} a statement), jobs/s`, sys('enqueue_bulk')),
    row('process, K = 1, jobs/s', sys('process_k1')),
    row('process, K = 4, jobs/s', k4, r.raw_floor_k4 as number),
    row('process, K = 16, jobs/s', sys('process_k16'), r.raw_floor_k16 as number),
    row(
      'process, K = 4, skiplock deleting completed jobs (as graphile-worker always does), jobs/s',
      { ...k4, skiplock: del.process_k4 as number },
      r.raw_floor_delete_k4 as number,
    ),
    row(`${fmt(flow.keys)} ordering keys, K = 4, jobs/s`, flow.ordering),
    row(`${fmt(flow.keys)} keys, ${flow.per_key} running per key, K = 4, jobs/s`, flow.per_key_limit),
    row(`publish an event to ${events.subscribers} subscribers, events/s`, events.per_second),
    row('WAL per job, bytes (fewer is better: here a ratio above 1× is worse)', wal, r.wal_raw_bytes_per_job as number),
    '',
    `- **Run-time schedules**: a tick with ${fmt(tick.due)} of ${fmt(tick.schedules)} schedules due takes ${ms(tick.tick_ms)} in ${tick.tick_statements} statements (${fmt(tick.occurrences_per_s)} occurrences/s); with nothing due, checking costs a worker's sweep nothing measurable (${ms(tick.idle_sweep_with_probe_ms)} with the check, ${ms(tick.idle_sweep_ms)} without).${tick.pgboss ? ` pg-boss's schedule pass over as many reads every row (${ms(tick.pgboss.read_all_ms)}) and evaluates every cron (${ms(tick.pgboss.evaluate_ms)}, scaled from 20,000) every 30 s on one leader.${tick.pgboss.pass_ms !== undefined ? ` Its own pass, run once: ${ms(tick.pgboss.pass_ms)} to put the ${fmt(tick.due)} due jobs on an internal queue, whose worker then moves them to their own queues 50 a fetch, ${tick.pgboss.forward_poll_s} s apart (up to ${fmt((tick.pgboss.forward_clock_steps ?? 0) * (tick.pgboss.forward_poll_s ?? 0))} s for all).` : ''}` : ''}`,
    batchHandlersLine(batch),
    `- **One invocation on the default pool** (5 connections, so a batch's completions are written beside the next claim; the table's K = 1 row gives skiplock one connection): ${fmt(r.skiplock_default_pool_k1 as number)} jobs/s, ${ratio(r.skiplock_default_pool_k1 as number, sys('process_k1')['graphile-worker'])} graphile-worker's K = 1. pg-boss with batchSize 100 instead of 500: ${fmt(r.pgboss_batch100_k4 as number)} jobs/s at K = 4, below the table's.`,
    ...nodeCpuLine(r.node_us_per_job as Record<string, Record<string, number>> | undefined),
    `- **Per claim**: ${trips['100']} statements per job at batches of 100 (${trips['1']} at 1); claim p50 / p99 ${latency.empty.p50} / ${ms(latency.empty.p99)} on an empty table, ${latency.finished.p50} / ${ms(latency.finished.p99)} beside ${fmt(r.params.finishedRows)} finished jobs. WAL deleting completed rows: ${fmt(del.wal_bytes_per_job)} bytes a job. The worker bundle imports in ${ms(cold.worker)} (a bare handler: ${ms(cold.bare)}).`,
  ].join('\n');
}

/** Node's CPU per job at K = 4 beside the floor's, when the run measured it (empty otherwise). */
function nodeCpuLine(cpu: Record<string, Record<string, number>> | undefined): string[] {
  const k4 = cpu?.k4;
  if (!k4) return [];
  const floor = k4['raw (skiplock schema)'];
  return [
    `- **Node's CPU per job** at K = 4 (user + system, the bench's whole process): skiplock ${k4.skiplock} µs, graphile-worker ${k4['graphile-worker']} µs, pg-boss ${k4['pg-boss']} µs, the minimal SQL on skiplock's table ${floor} µs (skiplock ${ratio(k4.skiplock, floor)} of it).`,
  ];
}

/** The batch-handler bullet of the full run: skiplock's figures, and pg-boss's when the run measured them. */
export function batchHandlersLine(batch: BatchHandlerFigures): string {
  const peer = batch.pgboss;
  const pair = (f: ModeFigures) => `${fmt(f.batch)} against ${fmt(f.single)} jobs/s (${f.ratio}×)`;
  const beside = (handler: 'noop' | 'bulk_api') =>
    peer
      ? `; pg-boss's own batch handler (\`batchSize\` ${batch.batchSize} against 1), ${pair(peer[handler])}, skiplock's batches at ${ratio(batch[handler].batch, peer[handler].batch)} pg-boss's rate`
      : '';
  return `- **Batch handlers** (concurrency ${batch.concurrency}${peer ? ', the same for pg-boss' : '; not measured for the peers'}): a batch of ${batch.batchSize} against one job per call, no-op jobs ${pair(batch.noop)}${beside('noop')}; calling a bulk API of ${batch.bulkApi.fixedMs} ms + ${batch.bulkApi.perItemMs} ms an item, ${pair(batch.bulk_api)}${beside('bulk_api')}.`;
}

/** What each system ran with: the settings the run records, flattened. */
function settingsBlock({ bench: r }: Results): string {
  const flatten = (value: unknown, prefix = ''): string[] =>
    value !== null && typeof value === 'object'
      ? Object.entries(value).flatMap(([k, v]) => flatten(v, prefix ? `${prefix}.${k}` : k))
      : [`\`${prefix}: ${String(value)}\``];
  return [
    '| system | settings |',
    '| --- | --- |',
    ...Object.entries(r.settings).map(([name, value]) => `| ${name} | ${flatten(value).join(', ')} |`),
  ].join('\n');
}

/** The serverless run: nudge latency, a burst against its floor, K against the floor, linger. */
function serverlessBlock({ serverless: s }: Results): string {
  const floor = (t: string) => s.burstFloors.find((f) => f.transport === t);
  const burst = (label: string) => {
    const b = s.bursts.find((x) => x.label === label);
    const f = floor(label);
    if (!b) return '';
    return `| ${fmt(s.burstParams.jobs)} jobs of ${ms(s.burstParams.jobMs)}, fan-out to ${s.burstParams.maxInvocations} invocations, ${label} | ${b.seconds} s (${times(b.seconds, b.idealSeconds)}) | ${f ? `${f.seconds} s (${times(f.seconds, f.idealSeconds)})` : '–'} | ${b.idealSeconds} s |`;
  };
  const k4 = s.process['4'];
  const kRows = Object.entries(s.process).map(
    ([k, p]) =>
      `| ${k} | ${fmt(p.skiplock)} | ${fmt(p['graphile-worker'])} | ${fmt(p.raw_floor)} | ${ratio(p.skiplock, p.raw_floor)} | ${ratio(p.skiplock, k4?.skiplock)} | ${ratio(p.raw_floor, k4?.raw_floor)} |`,
  );
  const linger = (label: string) => s.linger.find((l) => l.label === label);
  const nudged = linger('nudge, no linger');
  const longest = [...s.linger].sort((a, b) => b.lingerMs - a.lingerMs)[0];
  return [
    `\`npm run bench:serverless\`, ${s.date}, on the machine of the full run, in a run of its own (compare within a table): the app enqueues and nudges through the real AWS SDK to a local Invoke endpoint that runs the worker handler. The burst's floor is ${s.burstParams.maxInvocations} loops of raw SQL started at once, with no tick, fan-out or registration. Over a slow link skiplock claims early for the jobs about to end and the floor does not, so skiplock can drain a burst sooner than it. A "+N ms" row adds N ms to each round trip to the database.`,
    '',
    '| | skiplock | floor | ideal |',
    '| --- | ---: | ---: | ---: |',
    `| enqueue commit → handler start with a nudge, p50 / p99 | ${s.nudge.nudge.p50} / ${ms(s.nudge.nudge.p99)} | – | – |`,
    `| the same without a nudge, a ${s.nudge.cron.tickMs / 1000} s cron tick, p50 | ${ms(s.nudge.cron.p50)} | – | – |`,
    burst('pg'),
    burst('neon-http'),
    // The same bursts over a slow link (issue 41), when the run had them.
    ...s.bursts.filter((b) => (b.addedRoundTripMs ?? 0) > 0).map((b) => burst(b.label)),
    '',
    `| K invocations, no-op jobs, jobs/s | skiplock | graphile-worker | floor | skiplock ÷ floor | skiplock ÷ its K = 4 | floor ÷ its K = 4 |`,
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...kRows,
    '',
    nudged && longest
      ? `A trickle of ${s.lingerParams.jobs} jobs about ${fmt(s.lingerParams.meanGapMs)} ms apart: with a nudge each started in ${ms(nudged.latencyMs.p50)} (p50) for ${nudged.functionSeconds} s of function time in all; without one, an invocation that lingers ${fmt(longest.lingerMs)} ms after the queue ran dry caught ${longest.started} of them, at ${ms(longest.latencyMs.p50)} (p50), for ${longest.functionSeconds} s, and left ${longest.leftForTick} for the next tick.`
      : '',
  ].join('\n');
}

/** What a durable step costs, per driver, beside DBOS Transact. */
function stepsBlock({ steps: s }: Results): string {
  const series = new Map<string, Row[]>();
  for (const row of s.rows) {
    const name =
      row.system === 'dbos' ? `DBOS Transact ${s.dbos.version ?? ''}, ${row.driver}` : `skiplock, ${row.driver}`;
    series.set(name, [...(series.get(name) ?? []), row]);
  }
  const steps = [...new Set(s.rows.map((r) => r.steps))].sort((a, b) => a - b);
  const most = steps.at(-1) as number;
  return [
    `\`npm run bench:steps\`, ${s.date}: a job of N no-op steps against the same job calling the bodies directly (median of ${s.reps} pairs); DBOS runs \`DBOS.runStep\` in a long-lived process on the same Postgres.${s.dbos.error ? ` DBOS Transact did not run: ${s.dbos.error}.` : ''}`,
    '',
    `| per step | ${steps.map((n) => `${n} step${n === 1 ? '' : 's'}`).join(' | ')} | statements per step (${most} steps) |`,
    `| --- | ${steps.map(() => '---:').join(' | ')} | ---: |`,
    ...[...series].map(([name, rows]) => {
      const at = (n: number) => rows.find((r) => r.steps === n);
      return `| ${name} | ${steps.map((n) => (at(n) ? `${at(n)?.msPerStep.toFixed(3)} ms` : '–')).join(' | ')} | ${at(most)?.statementsPerStep.toFixed(2) ?? '–'} |`;
    }),
  ].join('\n');
}

/** The soak: claims while VACUUM lags, the last run with `--soak`. */
function soakBlock({ soak }: Results): string {
  const modes = Object.entries(soak).filter(([, v]) => (v as SoakResult)?.per_period) as [string, SoakResult][];
  const entries = (s: SoakResult) => {
    const seen = s.per_period.filter((p) => !p.vacuumed).map((p) => p.entries_per_claim);
    const [low, high] = [Math.min(...seen), Math.max(...seen)];
    return low === high ? String(low) : `${low}–${high}`;
  };
  const minutes = (s: SoakResult) => s.per_period.filter((p) => !p.vacuumed).at(-1)?.at_s ?? 0;
  const first = modes[0]?.[1];
  return [
    `\`npm run bench -- --soak\`, ${soak.date}: ${first?.jobs_per_s ?? '–'} jobs/s through two claim-and-settle loops, the table's autovacuum off for ${first ? minutes(first) / 60 : '–'} minutes, then one VACUUM.`,
    '',
    '| completed jobs | claim p50 without VACUUM | after one | ratio | lease-index entries per claim |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...modes.map(
      ([mode, s]) =>
        `| ${mode === 'keep' ? 'kept' : 'deleted'} | ${ms(s.claim_p50_ms_unvacuumed)} | ${ms(s.claim_p50_ms_vacuumed)} | ${times(s.claim_p50_ms_unvacuumed, s.claim_p50_ms_vacuumed)} | ${entries(s)} |`,
    ),
  ].join('\n');
}

/** docs/schedules.md: the schedule tick of the last full run. */
function scheduleTickBlock({ bench: r }: Results): string {
  const t = r.schedule_tick as ScheduleTickResult;
  return [
    `| ${fmt(t.schedules)} schedules, ${fmt(t.due)} due | figure |`,
    '| --- | --- |',
    `| a tick that enqueues the ${fmt(t.due)} | ${ms(t.tick_ms)} in ${t.tick_statements} statements: ${fmt(t.occurrences_per_s)} occurrences/s |`,
    `| 4 ticks at once on the same ${fmt(t.due)} | ${ms(t.concurrent_ticks_ms)} for all; ${fmt(t.concurrent_jobs)} jobs, none twice |`,
    `| nothing due, a tick called on its own | ${ms(t.idle_tick_ms)}, ${t.idle_tick_statements} statement |`,
    `| nothing due, in a worker invocation | no statement: its sweep (${ms(t.idle_sweep_ms)}) carries the probe (${ms(t.idle_sweep_with_probe_ms)} with it) |`,
    ...(t.pgboss
      ? [
          `| pg-boss 12's pass over as many schedules | reads every row (${ms(t.pgboss.read_all_ms)}) and evaluates every cron (${ms(t.pgboss.evaluate_ms)}) every 30 s on one leader |`,
          ...(t.pgboss.pass_ms !== undefined ? [pgBossOwnPassRow(t.pgboss, t.due)] : []),
        ]
      : []),
    '',
    `Measured ${r.date} by \`npm run bench\` (alone: \`npm run bench -- --schedule-tick-only\`) on the machine of [performance.md](performance.md#the-last-full-run).`,
  ].join('\n');
}

/** Every generated block of the docs, by name. */
export const DOC_BLOCKS: Record<string, DocBlock> = {
  'full-run': { page: PERFORMANCE_PAGE, from: RESULT_FILES.bench, render: fullRunBlock },
  settings: { page: PERFORMANCE_PAGE, from: RESULT_FILES.bench, render: settingsBlock },
  serverless: { page: PERFORMANCE_PAGE, from: RESULT_FILES.serverless, render: serverlessBlock },
  steps: { page: PERFORMANCE_PAGE, from: RESULT_FILES.steps, render: stepsBlock },
  soak: { page: PERFORMANCE_PAGE, from: RESULT_FILES.soak, render: soakBlock },
  'schedule-tick': { page: 'docs/schedules.md', from: RESULT_FILES.bench, render: scheduleTickBlock },
  'idle-day': { page: 'docs/cost.md', from: RESULT_FILES.idle, render: (r) => idleDayTable(r.idle) },
  'cost-model': {
    page: 'docs/cost.md',
    from: 'bench/cost-model.ts',
    render: (r) => costTables(r.idle, r.serverless).days,
  },
  'cost-peers': {
    page: 'docs/cost.md',
    from: 'bench/cost-model.ts',
    render: (r) => costTables(r.idle, r.serverless).peers,
  },
};

/** A generated block of a page: `<!-- name: from -->`, its body, `<!-- /name -->`. */
export interface FoundBlock {
  name: string;
  from: string;
  body: string;
  /** 1-based lines of the opening and the closing comment. */
  start: number;
  end: number;
}
const OPENING = /^<!-- ([a-z][a-z0-9-]*): (.+) -->$/;

export function blocksOf(source: string): FoundBlock[] {
  const lines = source.split('\n');
  const found: FoundBlock[] = [];
  lines.forEach((line, index) => {
    const open = OPENING.exec(line);
    if (!open) return;
    const [, name, from] = open as unknown as [string, string, string];
    const end = lines.findIndex((l, i) => i > index && l === `<!-- /${name} -->`);
    if (end < 0) return;
    found.push({ name, from, body: lines.slice(index + 1, end).join('\n'), start: index + 1, end: end + 1 });
  });
  return found;
}

/** The page with each of its known blocks rendered again from `results`. */
export function renderBlocks(page: string, source: string, results: Results): string {
  const lines = source.split('\n');
  // From the last block up, so that the lines of those above stay where they are.
  for (const block of blocksOf(source).reverse()) {
    const known = DOC_BLOCKS[block.name];
    if (!known || known.page !== page) continue;
    lines.splice(
      block.start - 1,
      block.end - block.start + 1,
      `<!-- ${block.name}: ${known.from} -->`,
      known.render(results),
      `<!-- /${block.name} -->`,
    );
  }
  return lines.join('\n');
}

/** bench/RESULTS*.md, each rendered whole from its JSON. */
export function resultPages(root: string, results: Results): Record<string, string> {
  const notes = join(root, SERVERLESS_NOTES);
  return {
    'bench/RESULTS.md': renderResultsPage(results.bench),
    [reportPath(false)]: renderServerlessPage(results.serverless, existsSync(notes) ? readFileSync(notes, 'utf8') : ''),
    'bench/RESULTS.steps.md': renderStepsPage(results.steps),
  };
}

/** Every page this module writes, as it should read: path → text. */
export function renderedPages(root: string, results: Results = loadResults(root)): Record<string, string> {
  const docs = [...new Set(Object.values(DOC_BLOCKS).map((b) => b.page))];
  return {
    ...resultPages(root, results),
    ...Object.fromEntries(
      docs.map((page) => [page, renderBlocks(page, readFileSync(join(root, page), 'utf8'), results)]),
    ),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const write = process.argv.includes('--write');
  const stale: string[] = [];
  for (const [path, text] of Object.entries(renderedPages(root))) {
    if (readFileSync(join(root, path), 'utf8') === text) continue;
    stale.push(path);
    if (write) writeFileSync(join(root, path), text);
  }
  if (stale.length === 0) console.log('every page is what the committed bench JSON renders');
  else console.log(`${write ? 'wrote' : `not what the JSON renders (${PERF_PAGE_WRITE}):`} ${stale.join(', ')}`);
}
