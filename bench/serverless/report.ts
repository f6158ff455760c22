import { writeFileSync } from 'node:fs';
import { resultPath, writeResult } from '../results.js';
import type { BurstParams, BurstResult } from './burst.js';
import type { BurstFloor } from './burst-floor.js';
import type { LingerParams, LingerResult } from './linger.js';
import type { NudgeParams, NudgeResult } from './nudge.js';
import type { ProcessRow } from './process.js';

/** What `npm run bench:serverless` records in bench/RESULTS.serverless.json; RESULTS.serverless.md is rendered from it. */
export interface ServerlessReport {
  /** YYYY-MM-DD (UTC). */
  date: string;
  quick: boolean;
  durationS: number;
  machine: {
    cores: number;
    memoryGiB: number;
    postgres: string;
    node: string;
    loadBefore: number[];
    loadAfter: number[];
  };
  nudgeParams: NudgeParams;
  nudge: NudgeResult;
  burstParams: BurstParams;
  bursts: BurstResult[];
  /** The same drain with the least machinery (bench/serverless/burst-floor.ts), on pg and over Neon's HTTP API. */
  burstFloors: BurstFloor[];
  /** Import of the packaged worker bundle in a fresh Node process, ms. */
  coldImportMs: number;
  processJobs: number;
  process: Record<string, ProcessRow>;
  processSettings: Record<string, unknown>;
  lingerParams: LingerParams;
  linger: LingerResult[];
}

const fmt = (n: number | undefined) => (n === undefined ? '–' : n.toLocaleString('en-US'));
const yes = (ok: boolean) => (ok ? 'yes' : 'no');
const ratio = (a: number | undefined, b: number | undefined) => (a && b ? `${(a / b).toFixed(2)}×` : '–');

/** One cold start, as far as it shows here: the bundle's import plus the first invocation's way to its first job. */
export const coldStartMs = (report: ServerlessReport, burst: BurstResult) => report.coldImportMs + burst.firstJobMs;
export const drainTargetS = (report: ServerlessReport, burst: BurstResult) =>
  1.5 * burst.idealSeconds + coldStartMs(report, burst) / 1000;

/** The file the figures go to: bench/RESULTS.serverless.md (a --quick run: …quick.md, not committed). */
export function reportPath(quick: boolean): string {
  return `bench/RESULTS.serverless${quick ? '.quick' : ''}.md`;
}

export function renderServerlessReport(report: ServerlessReport): string {
  const { nudge, bursts, machine } = report;
  const p = report.process;
  const burstRow = (b: BurstResult) =>
    `| ${b.label} | ${b.seconds} s | ${b.idealSeconds} s | ${(b.seconds / b.idealSeconds).toFixed(2)}× | ${b.invocationsStarted} (${b.saturated} saturated) | ${b.maxConcurrentInvocations} / ${b.limit} | ${b.maxSlotsHeld} | ${b.peakConnections.invocations} (all: ${b.peakConnections.total}) | ${b.containers} | ${b.firstJobMs} ms | ${b.perInvocationRate} | ${b.statementsPerJob} | ${b.load.processCores} / ${b.load.backendCores} / ${b.load.machineBusyCores} of ${report.machine.cores} | ${b.load.loopDelayMs.p50} / ${b.load.loopDelayMs.p99} / ${b.load.loopDelayMs.max} ms | ${b.lost} |`;
  const timeline = (b: BurstResult) =>
    [
      `- ${b.label}: fan-out decisions (ms after the tick: ready / running / arriving → starting): ${
        b.fanOuts.map((f) => `${f.atMs} ms: ${f.ready} / ${f.running} / ${f.arriving} → ${f.starting}`).join('; ') ||
        'none'
      }.`,
      `  Invocations arrived at (ms): ${b.arrivalsMs.join(', ')}.`,
      `  Jobs finished per second of the drain: ${b.perSecond.join(', ')}.`,
      ...(b.warnings.length > 0 ? [`  Worker warnings: ${b.warnings.slice(0, 5).join('; ')}`] : []),
    ].join('\n');
  const ks = Object.keys(p);
  const k4 = p['4'];
  const processRows = ks
    .map((k) => {
      const r = p[k] as ProcessRow;
      return `| K = ${k} | ${fmt(r.skiplock)} | ${fmt(r['graphile-worker'])} | ${fmt(r.raw_floor)} | ${ratio(r.skiplock, r['graphile-worker'])} | ${ratio(r.skiplock, k4?.skiplock)} | ${ratio(r.raw_floor, k4?.raw_floor)} |`;
    })
    .join('\n');
  const burstTargets = bursts
    .map((b) => {
      const target = drainTargetS(report, b);
      return [
        `| burst drain (${b.label}) ≤ 1.5× ideal + one cold start | ${b.seconds} s vs ${target.toFixed(2)} s (1.5 × ${b.idealSeconds} s + ${Math.round(coldStartMs(report, b))} ms) | ${yes(b.seconds <= target)} |`,
        `| invocations never above the maximum (${b.label}) | peak ${b.maxConcurrentInvocations} running, ${b.maxSlotsHeld} slots held, limit ${b.limit} | ${yes(b.maxConcurrentInvocations <= b.limit && b.maxSlotsHeld <= b.limit)} |`,
        `| no job lost (${b.label}) | ${b.lost} | ${yes(b.lost === 0)} |`,
      ].join('\n');
    })
    .join('\n');
  const kTargets = ['16', '32']
    .filter((k) => p[k])
    .map((k) => {
      const r = p[k] as ProcessRow;
      return `| K = ${k} ≥ K = 4 and ≥ graphile-worker at K = ${k} | ${fmt(r.skiplock)} vs ${fmt(k4?.skiplock)} (K = 4) and ${fmt(r['graphile-worker'])} | ${yes(r.skiplock >= (k4?.skiplock ?? 0) && r.skiplock >= r['graphile-worker'])} |`;
    })
    .join('\n');
  const floorOf = (transport: BurstFloor['transport']) => report.burstFloors.find((f) => f.transport === transport);
  const floorRatio = (f: BurstFloor | undefined) => (f ? (f.seconds / f.idealSeconds).toFixed(2) : '–');
  const issue25Burst = (label: 'pg' | 'neon-http', limit: number) => {
    const b = bursts.find((x) => x.label === label);
    if (!b) return '';
    const r = b.seconds / b.idealSeconds;
    return `| burst drain (${label}) ≤ ${limit}× ideal (issue 25) | ${r.toFixed(2)}× (${b.seconds} s; the floor on ${label}: ${floorRatio(floorOf(label))}×) | ${yes(r <= limit)} |`;
  };
  const floorSentence = (f: BurstFloor | undefined) => {
    if (!f) return '';
    const own = bursts.find((b) => b.label === f.transport);
    return `on ${f.transport} **${f.seconds} s, ${floorRatio(f)}× the ideal**, ${f.statementsPerJob} statements per job${own ? ` (skiplock on ${f.transport}: ${(own.seconds / f.seconds).toFixed(2)}× the floor's drain)` : ''}`;
  };
  // What the machine and the transport leave of the ideal (the floor's drain), and skiplock's share on
  // top: a target of 1.25× the ideal cannot be met where the floor itself drains in 1.25×.
  const floorShare = (b: BurstResult) => {
    const f = report.burstFloors.find((x) => x.transport === b.driver);
    return f
      ? `; its floor ${floorRatio(f)}× the ideal, skiplock ÷ the floor ${(b.seconds / f.seconds).toFixed(2)}×`
      : '';
  };
  const k32 = p['32'];
  const neonHttp = bursts.find((x) => x.label === 'neon-http');
  const issue25 = [
    issue25Burst('pg', 1.25),
    issue25Burst('neon-http', 1.35),
    neonHttp
      ? `| burst drain (neon-http) ≤ 1.25× ideal (issue 41) | ${(neonHttp.seconds / neonHttp.idealSeconds).toFixed(2)}× (${neonHttp.seconds} s${floorShare(neonHttp)}) | ${yes(neonHttp.seconds / neonHttp.idealSeconds <= 1.25)} |`
      : '',
    k32 && k4
      ? `| K = 32 ≥ 0.9× K = 4 (issue 25) | ${ratio(k32.skiplock, k4.skiplock)} (the raw floor: ${ratio(k32.raw_floor, k4.raw_floor)}) | ${yes(k32.skiplock >= 0.9 * k4.skiplock)} |`
      : '',
  ]
    .filter(Boolean)
    .join('\n');
  const bp = report.burstParams;
  // Issue 41: the bursts over a slow link, each beside the same driver's on the plain one.
  const slowLinks = bursts.filter((b) => (b.addedRoundTripMs ?? 0) > 0);
  const slowLinkSentence =
    slowLinks.length === 0
      ? ''
      : `\n\nOver a slow link (issue 41): the same bursts with ${slowLinks
          .map((b) => b.addedRoundTripMs)
          .filter((v, i, all) => all.indexOf(v) === i)
          .join(
            ' / ',
          )} ms added to every round trip between the functions and the database — on pg a TCP proxy on loopback holds each chunk of the wire protocol half of it in each direction (bench/serverless/slow-link.ts: statements and connection start-ups alike), on neon-http the SQL-over-HTTP endpoint holds each request half of it before running it and half before answering (a second endpoint process, warmed with 200 small queries). ${slowLinks
          .map((b) => {
            const plain = bursts.find(
              (x) => x.driver === b.driver && (x.addedRoundTripMs ?? 0) === 0 && !x.label.includes('(tried)'),
            );
            return `${b.label}: ${(b.seconds / b.idealSeconds).toFixed(2)}× the ideal, ${b.statementsPerJob} statements per job${plain ? ` (${plain.label}: ${(plain.seconds / plain.idealSeconds).toFixed(2)}×, ${plain.statementsPerJob})` : ''}`;
          })
          .join('; ')}.`;
  return `# Serverless benchmark results (issue 11)

Written by \`npm run bench:serverless\` (bench/serverless.ts) from [RESULTS.serverless.json](RESULTS.serverless.json), which holds every figure below (\`--json\` prints a summary as one object).
Run: ${report.date}${report.quick ? ' (`--quick`)' : ''}, ${report.durationS} s.
Machine: ${machine.cores} cores, ${machine.memoryGiB} GiB, PostgreSQL ${machine.postgres}, Node ${machine.node}; client, server, the Invoke endpoint and every invocation in one process on the same machine. Load average (1 min) ${machine.loadBefore[0]?.toFixed(2)} before, ${machine.loadAfter[0]?.toFixed(2)} after.

${(machine.loadBefore[0] ?? 0) >= 1 ? '> The machine was busy when this run began (load average 1 or more): take these figures as a smoke test of the harness; final figures come from a quiet machine.\n\n' : ''}## 1. Enqueue commit → handler start

| | p50 | p90 | p99 | max | samples |
| --- | --- | --- | --- | --- | --- |
| with a nudge | ${nudge.nudge.p50} ms | ${nudge.nudge.p90} ms | ${nudge.nudge.p99} ms | ${nudge.nudge.max} ms | ${nudge.nudge.samples}${nudge.nudge.missed ? ` (${nudge.nudge.missed} never started within 5 s)` : ''} |
| cron only, a ${nudge.cron.tickMs / 1000} s tick (computed) | ${fmt(nudge.cron.p50)} ms | – | ${fmt(nudge.cron.p99)} ms | – | mean ${fmt(nudge.cron.mean)} ms |

- With a nudge: the app enqueues one job with \`nudge: true\` through \`createEnqueuer({ nudger: createLambdaNudger(…) })\`; the nudger sends an asynchronous Invoke (\`InvocationType: 'Event'\`) through the real \`@aws-sdk/client-lambda\` to the in-process Invoke endpoint (bench/serverless/lambda-endpoint.ts), which answers 202 and runs the worker handler: registration in a slot (SKIPLOCK_MAX_INVOCATIONS=20), sweep, claim, handler. The clock starts when enqueue hands the committed job's queue to the nudger (its statement returned: the commit was acknowledged) and stops when the job's handler starts. ${nudge.nudge.samples} jobs after ${report.nudgeParams.warmup} not counted, one at a time, each ${nudge.pauseMs} ms after the previous nudge (the nudger's coalescing window) and after the previous invocation returned: each sample is a start of the worker while none runs, in a warm process (warm SDK client, warm container pool). ${nudge.invocations.nudged} invokes, ${nudge.invocations.saturated} saturated, ${nudge.invocations.containers} container(s).
- Cron only: not waited for. A job committed at a uniformly random moment waits U(0, ${nudge.cron.tickMs / 1000} s) for the next tick — median and mean half a tick, p99 0.99 of it — plus the tick's own way from its start to the handler's start, measured on ${nudge.claim.samples} jobs already committed when the worker handler was called: p50 ${nudge.claim.p50} ms, p99 ${nudge.claim.p99} ms, mean ${nudge.claim.mean} ms. So p50 = ${nudge.cron.tickMs / 2} + ${nudge.claim.p50} ms (the sum's quantiles are taken as the sum of the parts' quantiles: the wait dominates).

## 2. Burst drain

${fmt(bp.jobs)} jobs that each wait ${bp.jobMs} ms (a real timer), concurrency ${bp.concurrency} per invocation, at most ${bp.maxInvocations} invocations (SKIPLOCK_MAX_INVOCATIONS=${bp.maxInvocations}), function timeout ${bp.functionTimeoutMs / 1000} s, the adapter's default pool (SKIPLOCK_POOL_MAX=5) per container. One tick (an asynchronous Invoke through the real SDK) starts the first invocation; fan-out (its defaults: \`fanOutTargetMs\` 5,000, a check at most once a second after a full batch) starts the rest through the real SDK and the in-process endpoint. Drain time: from the tick's invoke to the moment the database shows no job queued or running. Ideal: ${fmt(bp.jobs)} × ${bp.jobMs / 1000} s ÷ (${bp.concurrency} × ${bp.maxInvocations}).

| run | drain | ideal | ÷ ideal | invocations started | most running at once / limit | most slots held | peak Postgres connections (invocations') | containers | tick → first job | jobs/s per invocation (ideal ${(bp.concurrency * 1000) / bp.jobMs}) | statements per job | CPU cores: this process / the bench database's backends / whole machine | event-loop delay p50 / p99 / max | lost |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${bursts.map(burstRow).join('\n')}${slowLinkSentence}

${bursts.map(timeline).join('\n')}

The floor (bench/serverless/burst-floor.ts): the same ${fmt(bp.jobs)} jobs on skiplock's table, drained by ${bp.maxInvocations} loops started at once (no tick, fan-out, registration or sweep), each keeping ${bp.concurrency} jobs on the same timer, refilling as skiplock does (with nothing running or half its slots free: complete what ended, claim what is free; the raw floor's two statements), each loop on one connection of its own, or over neon-http one HTTP request per statement to the same endpoint skiplock's neon-http run used: ${[floorSentence(floorOf('pg')), floorSentence(floorOf('neon-http'))].filter(Boolean).join('; ')}. What a floor leaves of the ideal is the harness, the machine and the transport; skiplock's drain over its floor is the library's share (its start, its statements — over HTTP each is parsed and planned afresh, and skiplock's claim costs more to plan than the floor's two short statements — and its Node work).

How it runs: bench/serverless/worker-function.ts plays the worker function with the adapter's configuration (\`loadConfig\` over the SKIPLOCK_* variables) and the options \`runWorker\` passes to \`createWorker\`, driven directly rather than through \`createLambdaWorker\`: the adapter keeps one pool per process, and this one process plays every container, so each concurrent invocation takes a container of its own (a warm idle one, else a new one with its own pool of 5, opened as the adapter opens it: \`connectLazily\`, on pg a pool without a Drizzle database). "Most running at once" is counted by the endpoint where the handlers run, with no concurrency limit applied there (a saturated invocation counts for the moment it takes to return); "slots held" and the connections are sampled from the database every ~100 ms. Over neon-http each statement is one HTTP request to the local SQL-over-HTTP endpoint (testing/neon-http-endpoint.ts), run in a process of its own as Neon's proxy runs on machines of its own (bench/serverless/neon-endpoint.ts; warmed first with 2,000 small queries, its pool of at most 20 open), whose pool holds the Postgres connections: the invocations hold none. One cold start, as far as it shows here: the packaged worker bundle's import in a fresh Node process (${report.coldImportMs} ms) plus the tick's way to its first job (in the table); Lambda's own sandbox start is not in it.

## 3. K concurrent invocations, no-op jobs (jobs/s)

${fmt(report.processJobs)} jobs per run, one run per system and K, each on a fresh database (vacuumed and analysed), with \`npm run bench\`'s settings: skiplock K invocation loops, each with its own connection, batch = concurrency = 500, counted (\`maxInvocations\` 64), so that with more than four running their claims spread over the 16 lanes (every sixteenth claim of each from the head); graphile-worker one runner of concurrency K (local queue 500); the raw floor K independent SKIP LOCKED claimers, batch 500, completion by UPDATE.

| K | skiplock | graphile-worker | raw floor | skiplock ÷ graphile | skiplock ÷ its K = 4 | floor ÷ its K = 4 |
| --- | --- | --- | --- | --- | --- | --- |
${processRows}

## 4. Linger: what waiting for more work buys and costs

${report.lingerParams.jobs} jobs enqueued one at a time at exponential gaps (mean ${report.lingerParams.meanGapMs} ms, the same arrivals for every row), in process on pg, at most one invocation at once. Without a nudge, one invocation starts with the first job (as a tick would), drains, then lingers: a job committed while it lingers starts at its next look (every 250 ms); a job committed while none runs is left for the next tick (a 60 s cron: 30 s on average). With a nudge, each enqueue starts an invocation (coalesced per second) and none lingers.

| run | jobs started | commit → start p50 / p99 | left for the next tick | invocations | function time | per job run | of it lingering |
| --- | --- | --- | --- | --- | --- | --- | --- |
${report.linger.map((l) => `| ${l.label} | ${l.started} | ${l.latencyMs.p50} / ${l.latencyMs.p99} ms | ${l.leftForTick} | ${l.invocations} | ${l.functionSeconds} s | ${fmt(l.functionMsPerJob)} ms | ${l.lingerSeconds} s |`).join('\n')}

## Against the targets of issue 11 (this run)

| target | result | met |
| --- | --- | --- |
| nudge p50 ≤ 250 ms | ${nudge.nudge.p50} ms | ${yes(nudge.nudge.p50 <= 250)} |
| nudge p99 ≤ 1 s | ${nudge.nudge.p99} ms | ${yes(nudge.nudge.p99 <= 1_000)} |
${burstTargets}
${kTargets}
${issue25}

## Settings (phase 3)

\`\`\`json
${JSON.stringify(report.processSettings, null, 2)}
\`\`\`
`;
}

/** The page: the report, then the hand-written notes of bench/serverless/NOTES.md. */
export function renderServerlessPage(report: ServerlessReport, notes: string): string {
  return renderServerlessReport(report) + (notes ? `\n${notes}` : '');
}

/** Writes bench/RESULTS.serverless.json and the page rendered from it; returns the page's path. */
export function writeServerlessReport(report: ServerlessReport, notes: string): string {
  const path = reportPath(report.quick);
  writeResult(resultPath('serverless', report.quick), report);
  writeFileSync(path, renderServerlessPage(report, notes));
  return path;
}
