import * as z from 'zod';
import { createLambdaNudger } from '../../adapters/lambda-invoke.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { NUDGE_DEFAULTS, type Nudger } from '../../core/nudge.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { scheduledEvent } from '../../testing/events.js';
import { percentile, round, sleep } from './figures.js';
import { startInvokeEndpoint } from './lambda-endpoint.js';
import { workerFunction } from './worker-function.js';

export interface NudgeParams {
  /** Nudged jobs measured, one at a time. */
  jobs: number;
  /** Nudged jobs run first and not counted (the SDK's and the pools' first use). */
  warmup: number;
  /** Ticks measured for the claim part of the cron-only figure. */
  ticks: number;
}

export interface NudgeResult {
  /** Commit → handler start with a nudge, ms. */
  nudge: { p50: number; p90: number; p99: number; max: number; samples: number; missed: number };
  /** Tick start → handler start for a job already committed (what a tick adds to its wait), ms. */
  claim: { p50: number; p99: number; mean: number; samples: number };
  /** The cron-only figure for a tick every `tickMs`: the expected wait for the next tick plus the claim part. */
  cron: { tickMs: number; p50: number; p99: number; mean: number };
  /** Pause between two nudged jobs (the nudger's coalescing window, so each nudge starts a worker). */
  pauseMs: number;
  invocations: { nudged: number; saturated: number; containers: number };
}

const FUNCTION = 'skiplock-bench-worker';
/** The tick of serverless.yml's worker (rate(1 minute)); Vercel Pro's cron is the same. */
const TICK_MS = 60_000;

/**
 * 1. Enqueue commit → handler start. The app enqueues one job with `nudge: true` (the shared
 * helper, outside a transaction); the Lambda nudger starts the worker function with an
 * asynchronous Invoke through the real SDK; the local Invoke endpoint answers 202 and runs the
 * worker handler, which registers, claims and starts the job. The clock starts when enqueue hands
 * the committed queues to the nudger (right after its statement returned, i.e. the commit was
 * acknowledged) and stops as the job's handler starts. One job at a time, each after the previous
 * invocation returned and the nudger's coalescing window ended: every sample is a start of the
 * worker while none runs, in a warm process (warm SDK client, warm container pool).
 *
 * The cron-only figure is computed, not waited for: a job committed at a uniformly random moment
 * waits for the next tick U(0, tick) — mean and median half a tick, p99 0.99 of it — plus what the
 * tick's invocation takes from its start to the handler's start, which is measured here on jobs
 * already committed when the worker handler is called.
 */
export async function measureNudgeLatency(url: string, params: NudgeParams): Promise<NudgeResult> {
  const starts = new Map<number, (at: number) => void>();
  const ping = defineJob({
    kind: 'ping',
    queue: 'pings',
    payload: z.object({ n: z.number() }),
    timeoutMs: 10_000,
    handler: (payload) => {
      starts.get(payload.n)?.(performance.now());
    },
  });
  const startOf = (n: number) => new Promise<number>((resolve) => starts.set(n, resolve));
  const app = connect({ connectionString: url, max: 2 });
  await migrate(app);
  const fn = workerFunction({
    functionName: FUNCTION,
    connectionString: url,
    env: { SKIPLOCK_DRIVER: 'pg', SKIPLOCK_CONCURRENCY: '10', SKIPLOCK_MAX_INVOCATIONS: '20' },
    jobs: [ping],
    timeoutMs: 60_000,
  });
  const endpoint = await startInvokeEndpoint({ [FUNCTION]: fn.handler });
  process.env.AWS_ENDPOINT_URL_LAMBDA = endpoint.url;
  // The nudger enqueue calls right after its statement returned: that moment is the commit's.
  let committedAt = 0;
  const lambdaNudger = createLambdaNudger({ [ping.queue]: FUNCTION });
  const nudger: Nudger = {
    nudge: (queues) => {
      committedAt = performance.now();
      return lambdaNudger.nudge(queues);
    },
  };
  const enqueuer = createEnqueuer({ nudger });
  const pauseMs = NUDGE_DEFAULTS.coalesceMs + 20;
  const latencies: number[] = [];
  let missed = 0;
  try {
    for (let n = -params.warmup; n < params.jobs; n++) {
      const started = startOf(n);
      await enqueuer.enqueue(app, ping, { n }, { nudge: true });
      const nudgedAt = committedAt;
      const at = await Promise.race([started, sleep(5_000).then(() => undefined)]);
      if (at === undefined) missed++;
      else if (n >= 0) latencies.push(at - nudgedAt);
      await endpoint.settled(10_000);
      const wait = nudgedAt + pauseMs - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const nudged = endpoint.invokes.length;

    // The claim part of a tick: jobs already committed, the worker handler called as the schedule calls it.
    const claims: number[] = [];
    for (let i = 0; i < params.ticks; i++) {
      const n = 1_000_000 + i;
      const started = startOf(n);
      await enqueuer.enqueue(app, ping, { n });
      const tickAt = performance.now();
      const invocation = fn.handler(scheduledEvent());
      claims.push((await started) - tickAt);
      await invocation;
    }
    const claim = {
      p50: round(percentile(claims, 0.5)),
      p99: round(percentile(claims, 0.99)),
      mean: round(claims.reduce((a, b) => a + b, 0) / Math.max(1, claims.length)),
      samples: claims.length,
    };
    return {
      nudge: {
        p50: round(percentile(latencies, 0.5)),
        p90: round(percentile(latencies, 0.9)),
        p99: round(percentile(latencies, 0.99)),
        max: round(Math.max(0, ...latencies)),
        samples: latencies.length,
        missed,
      },
      claim,
      cron: {
        tickMs: TICK_MS,
        p50: round(TICK_MS * 0.5 + claim.p50),
        p99: round(TICK_MS * 0.99 + claim.p99),
        mean: round(TICK_MS * 0.5 + claim.mean),
      },
      pauseMs,
      invocations: {
        nudged,
        saturated: fn.summaries.filter((s) => s.stoppedBecause === 'saturated').length,
        containers: fn.containers(),
      },
    };
  } finally {
    await endpoint.settled(10_000);
    await endpoint.close();
    await fn.close();
    await app.close();
  }
}
