// docs/cost.md's per-day and per-month tables, computed from measured figures and published prices;
// test/unit/docs-figures.test.ts checks the page against costTables(). Change an input here (a new
// price), or commit a new bench/RESULTS.serverless.json, then run `npx tsx bench/perf-page.ts --write`.
import type { IdleResults } from './idle/table.js';
import type { ServerlessReport } from './serverless/report.js';

/** The figures the model takes from `npm run bench:serverless` (bench/RESULTS.serverless.json). */
export function measured(serverless: ServerlessReport) {
  const burst = serverless.bursts.find((b) => b.label === 'pg');
  const nudged = serverless.linger.find((l) => l.label === 'nudge, no linger');
  if (!burst || !nudged) throw new Error('bench/RESULTS.serverless.json has no pg burst or no "nudge, no linger" row');
  return {
    /** A nudged job's invocation time beyond its handler (linger table, "nudge, no linger"). */
    nudgedJobOverheadMs: nudged.functionMsPerJob,
    /** Jobs a second one invocation ran at its concurrency with the burst's jobs (burst, pg). */
    burstJobsPerSecond: burst.perInvocationRate,
    /** The burst's job: a wait of this long. A longer handler runs proportionally fewer jobs a second. */
    burstJobMs: serverless.burstParams.jobMs,
    /** Statements per job in that burst (batched claims and settles). */
    statementsPerJob: burst.statementsPerJob,
  };
}

/** Measured apart from the benches. */
const COUNTED = {
  /** Statements of a worker invocation that ran one job: sweep, claim, settle, next-due. */
  statementsPerNudgedJob: 5,
  /** Statements of one idle worker tick and one idle maintenance tick before idle ticks (measured). */
  tickStatements: { worker: 3, maintenance: 14 },
} as const;

/** Prices the providers published, read on this date. */
export const PRICES = {
  date: '2026-11-29',
  neonCuHour: 0.14,
  neonFreeCuHours: 100,
  vercelInvocationsIncluded: 1_000_000,
  vercelPerMillionInvocations: 0.6,
  vercelMemoryGbHourIncluded: 1_440,
  vercelMemoryGbHour: 0.0106,
  lambdaGbSecond: 0.0000166667,
  lambdaFreeGbSeconds: 400_000,
  lambdaPerMillionRequests: 0.2,
  lambdaFreeRequests: 1_000_000,
  sqsPerMillion: 0.4,
  vercelQueuesPerMillion: 0.6,
} as const;

/** The apps: jobs a day, the hours they arrive in, what a handler waits. */
export const APPS = {
  handlerMs: 200,
  concurrency: 10,
  light: { jobs: 1_000, hours: 8 },
  busy: { jobs: 1_000_000 },
  /** Vercel Pro crons of the Next.js template: two worker routes every minute, maintenance every 10. */
  vercelTicks: 2 * 1440 + 144,
  /** Lambda's rules before idle ticks: the worker every minute, maintenance every 10 minutes. */
  lambdaTicks: 1440 + 144,
  neonCu: { quiet: 0.25, busy: 1 },
} as const;

const n = (x: number) => Math.round(x).toLocaleString('en-US');
const usd = (x: number) => `$${x.toFixed(2)}`;

export function costTables(idle: IdleResults, serverless: ServerlessReport): { days: string; peers: string } {
  const MEASURED = { ...measured(serverless), ...COUNTED };
  const sum = (hours: IdleResults['idle_day']['lambda'], key: 'statements' | 'invocations') =>
    hours.reduce((t, h) => t + h[key], 0);
  const idleStatements = {
    lambda: sum(idle.idle_day.lambda, 'statements'),
    vercel: sum(idle.idle_day.vercel, 'statements'),
  };
  const lambdaIdleInvocations = sum(idle.idle_day.lambda, 'invocations');
  const activeMin = idle.database_active_minutes;
  const everyTick = 1440 * MEASURED.tickStatements.worker + 144 * MEASURED.tickStatements.maintenance;
  const everyTickVercel = 2 * 1440 * MEASURED.tickStatements.worker + 144 * MEASURED.tickStatements.maintenance;
  const nudged = (jobs: number) => (jobs * (APPS.handlerMs + MEASURED.nudgedJobOverheadMs)) / 1000;
  const busySeconds = APPS.busy.jobs / ((MEASURED.burstJobsPerSecond * MEASURED.burstJobMs) / APPS.handlerMs);
  const busyInvocations = 86_400 + APPS.vercelTicks;
  const lightStatements = APPS.light.jobs * MEASURED.statementsPerNudgedJob;
  const busyStatements = APPS.busy.jobs * MEASURED.statementsPerJob;

  const perDay = [
    '| app | platform | invocations a day | function time a day | database active a day (Neon) | Postgres statements a day |',
    '| --- | --- | --- | --- | --- | --- |',
    `| idle | Vercel Pro (2 worker routes, maintenance) | ${n(APPS.vercelTicks)} (cron ticks, answered from the hint) | a few ms each | ${activeMin.vercel} min | ${n(idleStatements.vercel)} |`,
    `| idle | Lambda | ${lambdaIdleInvocations} | under a second each | ${activeMin.lambda} min | ${n(idleStatements.lambda)} |`,
    `| idle, \`SKIPLOCK_IDLE=false\` | Lambda / Vercel Pro | ${n(APPS.lambdaTicks)} / ${n(APPS.vercelTicks)} | a few ms each | 24 h | ~${n(everyTick)} / ~${n(everyTickVercel)} |`,
    `| light | Vercel Pro | ~${n(APPS.vercelTicks + APPS.light.jobs)} | ~${n(nudged(APPS.light.jobs))} s | ~${APPS.light.hours} h | ~${n(lightStatements + idleStatements.vercel)} |`,
    `| light | Lambda | ~${n(lambdaIdleInvocations + APPS.light.jobs)} | ~${n(nudged(APPS.light.jobs))} s | ~${APPS.light.hours} h | ~${n(lightStatements + idleStatements.lambda)} |`,
    `| busy | either | ≤ ${n(busyInvocations)} | ~${n(busySeconds)} s (${APPS.concurrency} jobs share an invocation's time) | 24 h | ~${n(busyStatements)} |`,
  ];

  const cuHours = (cu: number, hoursADay: number) => cu * hoursADay * 30;
  const neon = (cu: number, hoursADay: number) => {
    const h = cuHours(cu, hoursADay);
    const free = h <= PRICES.neonFreeCuHours ? 'inside Free' : `over Free's ${PRICES.neonFreeCuHours}`;
    return `${h.toFixed(1)} CU-h: ${free}; ${usd(h * PRICES.neonCuHour)} on Launch`;
  };
  const busyGbSeconds = busySeconds * 30;
  const busyLambda =
    Math.max(0, busyGbSeconds - PRICES.lambdaFreeGbSeconds) * PRICES.lambdaGbSecond +
    (Math.max(0, busyInvocations * 30 - PRICES.lambdaFreeRequests) / 1e6) * PRICES.lambdaPerMillionRequests;
  const busyMemoryGbHours = (busySeconds * 30) / 3600;
  const busyVercel =
    (Math.max(0, busyInvocations * 30 - PRICES.vercelInvocationsIncluded) / 1e6) * PRICES.vercelPerMillionInvocations +
    Math.max(0, busyMemoryGbHours - PRICES.vercelMemoryGbHourIncluded) * PRICES.vercelMemoryGbHour;
  const monthly = [
    `| app | Neon (${APPS.neonCu.quiet} CU; busy: ${APPS.neonCu.busy} CU) | Vercel Pro functions | Lambda (1 GB) |`,
    '| --- | --- | --- | --- |',
    `| idle | ${neon(APPS.neonCu.quiet, Math.max(activeMin.lambda, activeMin.vercel) / 60)} | inside the included usage | inside the free tier |`,
    `| idle, every tick querying | ${neon(APPS.neonCu.quiet, 24)} | inside the included usage | inside the free tier |`,
    `| light | ${neon(APPS.neonCu.quiet, APPS.light.hours)} | inside the included usage | inside the free tier |`,
    `| busy | ${neon(APPS.neonCu.busy, 24)} | ${((busyInvocations * 30) / 1e6).toFixed(1)} M invocations and ${n(busyMemoryGbHours)} GB-hours of memory (1 GB) a month: ${usd(busyVercel)} beyond what Pro includes, plus Active CPU, counted only while a handler computes | ${n(busyGbSeconds)} GB-s a month: ${usd(busyLambda)} after the free tier, requests included |`,
  ];
  const ops = (APPS.busy.jobs * 30 * 3) / 1e6;
  const peers = [
    `For the busy app (${n((APPS.busy.jobs * 30) / 1e6)} M jobs a month), the queue alone, before any compute:`,
    '',
    `- **SQS**: a message is a send, a receive and a delete: ~${n(ops)} M requests, ~${usd(ops * PRICES.sqsPerMillion)} a month at ${usd(PRICES.sqsPerMillion)} per million (~${usd((ops / 10) * PRICES.sqsPerMillion)} when batched by ten). The enqueue is not in your database's transaction.`,
    `- **Vercel Queues**: billed per operation (send, receive, delete; push deliveries notify): ~${n(ops)} M operations, ~${usd(ops * PRICES.vercelQueuesPerMillion)} a month at ${usd(PRICES.vercelQueuesPerMillion)} per million.`,
    '- **Inngest**: billed per execution (each run and each step); its current prices were not among the sources this page was checked against, so no figure here.',
    `- **skiplock**: no per-job fee; the jobs are rows in the Postgres you pay for (the busy app keeps a Neon compute up all month: ${usd(cuHours(APPS.neonCu.busy, 24) * PRICES.neonCuHour)} above, most of which your app's own traffic would use anyway), ~${MEASURED.statementsPerJob} statements each.`,
  ];
  return {
    days: [...perDay, '', `A month (30 days) at the prices published on ${PRICES.date}:`, '', ...monthly].join('\n'),
    peers: peers.join('\n'),
  };
}
