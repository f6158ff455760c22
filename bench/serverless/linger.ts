import * as z from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createNudger } from '../../core/nudge.js';
import { createWorker, type InvocationSummary } from '../../core/worker/index.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { percentile, round, sleep } from './figures.js';

export interface LingerParams {
  /** Jobs enqueued one at a time, without a nudge unless the variant nudges. */
  jobs: number;
  /** Mean gap between two enqueues (exponential gaps from a fixed seed: the same arrivals for every variant). */
  meanGapMs: number;
}

export interface LingerResult {
  label: string;
  lingerMs: number;
  nudge: boolean;
  /** Jobs that started in an invocation (the rest were left for the next cron tick). */
  started: number;
  /** Commit → handler start of those, ms. */
  latencyMs: { p50: number; p99: number };
  /** Jobs committed while no invocation ran: each waits for the next tick (30 s on average for a 60 s cron). */
  leftForTick: number;
  invocations: number;
  /** Function time: the sum of the invocations' durations, s, and per job run, ms. */
  functionSeconds: number;
  functionMsPerJob: number;
  /** Of the function time, the part after the queue first ran dry in each invocation, s (lingering; no-op jobs). */
  lingerSeconds: number;
}

/** Deterministic exponential gaps (a small LCG), so every variant sees the same arrivals. */
function gaps(count: number, meanMs: number): number[] {
  let seed = 42;
  return Array.from({ length: count }, () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return Math.round(-Math.log(1 - seed / 2 ** 31) * meanMs);
  });
}

/**
 * What lingering buys and costs. A trickle of jobs arrives one at a time; one invocation is started
 * at the first (as a tick or a nudge would), drains, then lingers for `lingerMs`: a job committed
 * while it lingers starts within a look (250 ms); one committed after it returned is left for the
 * next tick. Beside it, the nudge with no linger (each enqueue starts an invocation, coalesced per
 * second): the latency and the function time each pays. In process, on pg: the point is the loop,
 * not the transport.
 */
export async function measureLinger(
  url: string,
  variant: { label: string; lingerMs: number; nudge: boolean },
  params: LingerParams,
): Promise<LingerResult> {
  const db = connect({ connectionString: url, max: 4 });
  await migrate(db);
  const startedAt = new Map<number, number>();
  const ping = defineJob({
    kind: 'ping',
    payload: z.object({ n: z.number() }),
    timeoutMs: 5_000,
    handler: ({ n }) => void startedAt.set(n, performance.now()),
  });
  const summaries: { summary: InvocationSummary; ms: number }[] = [];
  const running = new Set<Promise<void>>();
  let lingeringSince: number | undefined;
  let lingerMsTotal = 0;
  const worker = createWorker({
    db,
    jobs: [ping],
    maxInvocations: 1,
    lingerMs: variant.lingerMs,
    logger: {
      ...silentLogger,
      info: (message: string) => {
        if (message === 'lingering') lingeringSince ??= performance.now();
      },
    },
  });
  const invoke = () => {
    const t = performance.now();
    const run = worker.runInvocation({ remainingMs: 60_000 }).then((summary) => {
      summaries.push({ summary, ms: performance.now() - t });
      if (lingeringSince !== undefined) lingerMsTotal += performance.now() - lingeringSince;
      lingeringSince = undefined;
      running.delete(run);
    });
    running.add(run);
  };
  const nudger = createNudger({ workerFor: () => ({ start: async () => invoke() }) });
  const enqueuer = createEnqueuer({ nudger });
  const committedAt = new Map<number, number>();
  let leftForTick = 0;
  try {
    const arrivals = gaps(params.jobs, params.meanGapMs);
    for (const [n, gap] of arrivals.entries()) {
      if (n > 0) await sleep(gap);
      const idle = running.size === 0;
      await enqueuer.enqueue(db, ping, { n }, { nudge: variant.nudge });
      committedAt.set(n, performance.now());
      // The first job is the tick's; later ones find an invocation running, or wait for a tick.
      if (n === 0 && !variant.nudge) invoke();
      else if (idle && !variant.nudge) leftForTick++;
    }
    while (running.size > 0) await Promise.all(running);
  } finally {
    await db.close();
  }
  const latencies = [...startedAt].map(([n, at]) => at - (committedAt.get(n) ?? at));
  const functionMs = summaries.reduce((sum, s) => sum + s.ms, 0);
  return {
    ...variant,
    started: startedAt.size,
    latencyMs: { p50: round(percentile(latencies, 0.5)), p99: round(percentile(latencies, 0.99)) },
    leftForTick,
    invocations: summaries.length,
    functionSeconds: round(functionMs / 1000),
    functionMsPerJob: round(functionMs / Math.max(1, startedAt.size)),
    lingerSeconds: round(lingerMsTotal / 1000),
  };
}
