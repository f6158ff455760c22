import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as wait } from 'node:timers/promises';
import pg from 'pg';
import * as z from 'zod';
import { lambdaStarter } from '../../adapters/lambda-invoke.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob, type JobRequest } from '../../core/jobs.js';
import type { Driver, NeonOptions } from '../../db/connect.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { scheduledEvent } from '../../testing/events.js';
import { vacuumAnalyze } from '../db.js';
import { round, sleep } from './figures.js';
import { startInvokeEndpoint } from './lambda-endpoint.js';
import { startSlowLink } from './slow-link.js';
import { INVOCATION_APP, type LoggedLine, workerFunction } from './worker-function.js';

export interface BurstParams {
  jobs: number;
  jobMs: number;
  concurrency: number;
  maxInvocations: number;
  /** The worker function's timeout (serverless.yml: 60 s): each invocation's remaining time. */
  functionTimeoutMs: number;
  /** Give up waiting for the drain after this long (what is left then counts as lost). */
  giveUpMs: number;
}

export interface BurstVariant {
  driver: Driver;
  /** How the table names it (the driver, and what was changed). */
  label: string;
  /** Neon's driver settings (the local SQL-over-HTTP endpoint). */
  neon?: NeonOptions;
  /** More SKIPLOCK_* variables for the function (what was tried). */
  env?: Record<string, string>;
  /**
   * A slow link: ms added to each round trip between the function and the database. On pg the
   * function's connections go through a delaying TCP proxy (bench/serverless/slow-link.ts); on
   * neon-http the endpoint in `neon` must have been started with the same delay (neon-endpoint.ts).
   */
  addedRoundTripMs?: number;
  /** The SQL-over-HTTP endpoint's process (neon-endpoint.ts), when apart: its CPU is counted in `load`. */
  endpointPid?: number;
}

export interface BurstResult {
  driver: Driver;
  label: string;
  /** The round trip the slow link added, ms (absent or 0: none; runs before issue 41 did not record it). */
  addedRoundTripMs?: number;
  seconds: number;
  idealSeconds: number;
  /** Every invocation the endpoint ran: the tick's and those fan-out started. */
  invocationsStarted: number;
  /** Invocations that returned saturated (every slot held when they started). */
  saturated: number;
  /** Most worker handlers running at once, counted by the endpoint that runs them. */
  maxConcurrentInvocations: number;
  /** Most slots held at once, sampled in the database every ~100 ms. */
  maxSlotsHeld: number;
  limit: number;
  lost: number;
  /** Postgres connections of the bench database, sampled every ~100 ms: all of them, and the invocations'. */
  peakConnections: { total: number; invocations: number };
  /** Containers (each with a pool of its own) the function needed. */
  containers: number;
  /** Tick → the first job's handler start (new container: pool, registration, sweep, claim), ms. */
  firstJobMs: number;
  /** When each fan-out start was decided (ms after the tick) and what it saw. */
  fanOuts: { atMs: number; ready: number; running: number; arriving: number; starting: number }[];
  /** When the invocations arrived at the endpoint, ms after the tick. */
  arrivalsMs: number[];
  /** Jobs completed per second of the drain (from the handlers' ends). */
  perSecond: number[];
  /** Transactions the bench database committed per job during the drain (the monitor's own left out): statements per job, as every worker statement runs on its own. */
  statementsPerJob: number;
  /** Jobs per second of each admitted invocation (completed ÷ its duration), mean; the ideal is concurrency ÷ the job's time. */
  perInvocationRate: number;
  /**
   * During the drain: CPU this process used (in cores), the machine's cores busy (all processes), the
   * bench database's backends, the SQL-over-HTTP endpoint's process when apart, the event loop's delay.
   */
  load: {
    processCores: number;
    machineBusyCores: number;
    backendCores: number;
    endpointCores?: number;
    loopDelayMs: { p50: number; p99: number; max: number };
  };
  warnings: string[];
}

/** CPU time a local process has used so far, in clock ticks (utime + stime); undefined once it is gone. */
export function processTicks(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}
/** Linux's USER_HZ: /proc's clock ticks per second. */
export const TICKS_PER_SECOND = 100;

/** Busy and total CPU time of the machine so far (all cores), ms. */
export function machineCpu(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const all = times.user + times.nice + times.sys + times.idle + times.irq;
    total += all;
    busy += all - times.idle;
  }
  return { busy, total };
}

/**
 * The burst's table: skiplock's schema migrated into `url`, `jobs` jobs of `job` (payload `{ n }`)
 * enqueued in batches of 1,000, then vacuumed and analysed. The drain and its floor start from it.
 */
export async function seedBurst(
  url: string,
  job: { with(payload: { n: number }): JobRequest },
  jobs: number,
): Promise<void> {
  const app = connect({ connectionString: url, max: 2 });
  await migrate(app);
  const enqueuer = createEnqueuer();
  for (let i = 0; i < jobs; i += 1_000) {
    await enqueuer.enqueueMany(
      app,
      Array.from({ length: Math.min(1_000, jobs - i) }, (_, j) => job.with({ n: i + j })),
    );
  }
  await app.close();
  await vacuumAnalyze(url);
}

const FUNCTION = 'skiplock-bench-burst';

/**
 * 2. Burst drain. `jobs` jobs of `jobMs` (a real timer) are committed; one tick (an asynchronous
 * Invoke of the worker function through the real SDK, as the schedule's would be) starts the
 * first invocation; fan-out starts the rest through the real SDK and the in-process endpoint. The
 * clock runs from the tick's invoke to the moment the database shows no job queued or running.
 */
export async function measureBurstDrain(url: string, variant: BurstVariant, params: BurstParams): Promise<BurstResult> {
  const { driver, neon } = variant;
  let t0 = 0;
  let firstJobAt = 0;
  const ends: number[] = [];
  const wait100 = defineJob({
    kind: 'burst',
    payload: z.object({ n: z.number() }),
    timeoutMs: 10_000,
    handler: async () => {
      firstJobAt ||= performance.now();
      await wait(params.jobMs);
      ends.push(performance.now());
    },
  });
  await seedBurst(url, wait100, params.jobs);

  const addedRoundTripMs = variant.addedRoundTripMs ?? 0;
  const link = driver === 'pg' && addedRoundTripMs > 0 ? await startSlowLink(url, addedRoundTripMs) : undefined;
  const fn = workerFunction({
    functionName: FUNCTION,
    connectionString: link ? link.url(url) : url,
    env: {
      SKIPLOCK_DRIVER: driver,
      SKIPLOCK_CONCURRENCY: String(params.concurrency),
      SKIPLOCK_MAX_INVOCATIONS: String(params.maxInvocations),
      ...variant.env,
    },
    jobs: [wait100],
    neon,
    timeoutMs: params.functionTimeoutMs,
  });
  const endpoint = await startInvokeEndpoint({ [FUNCTION]: fn.handler });
  process.env.AWS_ENDPOINT_URL_LAMBDA = endpoint.url;
  const monitor = new pg.Client({ connectionString: url, application_name: 'skiplock_bench_monitor' });
  await monitor.connect();
  const peak = { total: 0, invocations: 0, slots: 0 };
  /** The monitor's own statements, left out of the database's count of transactions. */
  let ownQueries = 0;
  // The bench database's backends (Postgres runs on this machine): CPU ticks when first and last seen.
  const backends = new Map<number, { first: number; last: number }>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      ownQueries++;
      const { rows } = await monitor.query(
        `select count(*)::int as total, count(*) filter (where application_name = $1)::int as invocations,
           (select count(*)::int from skiplock.invocations where expires_at > now()) as slots,
           coalesce(array_agg(pid), '{}') as pids
         from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
        [INVOCATION_APP],
      );
      for (const pid of rows[0].pids as number[]) {
        const ticks = processTicks(pid);
        if (ticks === undefined) continue;
        const seen = backends.get(pid);
        if (seen) seen.last = ticks;
        else backends.set(pid, { first: ticks, last: ticks });
      }
      peak.total = Math.max(peak.total, rows[0].total);
      peak.invocations = Math.max(peak.invocations, rows[0].invocations);
      peak.slots = Math.max(peak.slots, rows[0].slots);
      await sleep(100);
    }
  })().catch(() => {}); // a failed sample only ends the sampling: the peaks so far stand
  const commits = async () => {
    ownQueries++;
    const { rows } = await monitor.query(
      'select xact_commit::bigint as n from pg_stat_database where datname = current_database()',
    );
    return Number(rows[0].n);
  };
  const remaining = async () => {
    ownQueries++;
    return Number(
      (await monitor.query(`select count(*)::int as n from skiplock.jobs where state in ('queued', 'running')`)).rows[0]
        .n,
    );
  };

  const loop = monitorEventLoopDelay({ resolution: 10 });
  try {
    loop.enable();
    const cpu0 = process.cpuUsage();
    const machine0 = machineCpu();
    const commits0 = await commits();
    const own0 = ownQueries;
    const endpoint0 = variant.endpointPid === undefined ? undefined : processTicks(variant.endpointPid);
    t0 = performance.now();
    await lambdaStarter(FUNCTION, scheduledEvent()).start(1); // the tick
    let drainedAt: number | undefined;
    while (performance.now() - t0 < params.giveUpMs) {
      if ((await remaining()) === 0) {
        drainedAt = performance.now();
        break;
      }
      await sleep(25);
    }
    const seconds = ((drainedAt ?? performance.now()) - t0) / 1000;
    loop.disable();
    const cpu = process.cpuUsage(cpu0);
    const machine1 = machineCpu();
    const endpoint1 = variant.endpointPid === undefined ? undefined : processTicks(variant.endpointPid);
    const cores = cpus().length;
    const load = {
      processCores: round((cpu.user + cpu.system) / 1000 / (seconds * 1000), 2),
      machineBusyCores: round(((machine1.busy - machine0.busy) / (machine1.total - machine0.total)) * cores, 2),
      // A lower bound: a backend's CPU before it was first seen (≤ one sample) is not counted.
      backendCores: round(
        [...backends.values()].reduce((sum, b) => sum + b.last - b.first, 0) / TICKS_PER_SECOND / seconds,
        2,
      ),
      ...(endpoint0 !== undefined && endpoint1 !== undefined
        ? { endpointCores: round((endpoint1 - endpoint0) / TICKS_PER_SECOND / seconds, 2) }
        : {}),
      loopDelayMs: {
        p50: round(loop.percentile(50) / 1e6),
        p99: round(loop.percentile(99) / 1e6),
        max: round(loop.max / 1e6),
      },
    };
    const admitted = fn.summaries.filter((s) => s.stoppedBecause !== 'saturated' && s.durationMs > 0);
    await endpoint.settled(params.functionTimeoutMs + 10_000);
    sampling = false;
    await sampler;
    await sleep(1_500); // backends report their counts to the statistics at most once a second
    const statements = (await commits()) - commits0 - (ownQueries - own0);
    const { rows } = await monitor.query(`select count(*)::int as n from skiplock.jobs where state <> 'completed'`);
    const fanOuts = fn.lines
      .filter((l) => l.msg === 'fan_out')
      .map((l) => ({
        atMs: Math.round(l.at - t0),
        ready: Number(l.fields?.ready),
        running: Number(l.fields?.running),
        arriving: Number(l.fields?.arriving),
        starting: Number(l.fields?.starting),
      }));
    const perSecond: number[] = [];
    for (const end of ends) {
      const s = Math.floor((end - t0) / 1000);
      perSecond[s] = (perSecond[s] ?? 0) + 1;
    }
    return {
      driver,
      label: variant.label,
      addedRoundTripMs,
      seconds: round(seconds, 2),
      idealSeconds: round((params.jobs * params.jobMs) / 1000 / (params.concurrency * params.maxInvocations), 2),
      invocationsStarted: endpoint.invokes.length,
      saturated: fn.summaries.filter((s) => s.stoppedBecause === 'saturated').length,
      maxConcurrentInvocations: endpoint.peak(),
      maxSlotsHeld: peak.slots,
      limit: params.maxInvocations,
      lost: rows[0].n,
      peakConnections: { total: peak.total, invocations: peak.invocations },
      containers: fn.containers(),
      firstJobMs: round(firstJobAt - t0),
      fanOuts,
      arrivalsMs: endpoint.invokes.map((i) => Math.round(i.at - t0)),
      perSecond: Array.from(perSecond, (n) => n ?? 0),
      statementsPerJob: round(statements / params.jobs, 2),
      perInvocationRate: round(
        admitted.reduce((sum, s) => sum + s.completed / (s.durationMs / 1000), 0) / Math.max(1, admitted.length),
      ),
      load,
      warnings: fn.lines
        .filter((l: LoggedLine) => l.level !== 'info')
        .map((l) => `${l.msg} ${JSON.stringify(l.fields)}`),
    };
  } finally {
    loop.disable();
    sampling = false;
    await sampler;
    await endpoint.close();
    await fn.close();
    await monitor.end();
    await link?.close();
  }
}
