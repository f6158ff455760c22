import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { z } from 'zod';
import { DiscardError, RetryAfterError, RetryError } from '../base/errors.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { type Receiver, seeded, startReceiver } from './receiver.js';

/**
 * The background-jobs guide's drill: webhooks to a local receiver where one partner is down for
 * `downMs` and then recovers, while the others answer 500 to 10 % and hang on another 10 %. Run
 * with the jobs naming no destination (`plain`), naming it (`breaker`), and naming it with a rate
 * limit per partner (`rated`).
 */
export type DrillMode = 'plain' | 'breaker' | 'rated';
export interface DrillOptions {
  jobs: number;
  /** The share of the jobs for the failing partner. */
  failingShare: number;
  downMs: number;
  /** Concurrent invocation loops, each on its own connection. */
  invocations: number;
  /** Give up waiting for the jobs this long after the partner recovered. */
  drainLimitMs: number;
  breaker: { coolDownMs: number };
  /** In the `rated` run: at most this many requests a second to each partner (destinationRateLimits '*'). */
  ratePerS: number;
  databaseUrl: string;
  progress?: (line: string) => void;
}

export interface DrillResult {
  attempts_per_failing_job: number;
  dead: number;
  drain_after_recovery_s: number;
  requests_while_down: number;
  lost: number;
  /** The most requests one partner got within any one second (a sliding window over the whole run). */
  max_requests_per_s: number;
}

/** The most of `times` (ms) within any window of `windowMs`. */
export function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while ((sorted[i] as number) - (sorted[j] as number) >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

const FAILING = 'partner-0';
const PARTNERS = 5;

export const DRILL_FULL = {
  jobs: 100,
  failingShare: 0.3,
  downMs: 30_000,
  invocations: 4,
  drainLimitMs: 120_000,
  breaker: { coolDownMs: 5_000 },
  ratePerS: 10,
} as const;
export const DRILL_QUICK = { ...DRILL_FULL, downMs: 15_000, drainLimitMs: 60_000 } as const;

export async function runDrill(options: DrillOptions, mode: DrillMode): Promise<DrillResult> {
  const withBreaker = mode !== 'plain';
  const say = options.progress ?? (() => {});
  const schema = `drill_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: options.databaseUrl, max: 2 });
  admin.on('error', () => {});
  const setup = connect({ connectionString: options.databaseUrl, max: 2 });
  const receiver: Receiver = await startReceiver({
    failing: FAILING,
    errorShare: 0.1,
    hangShare: 0.1,
    random: seeded(mode === 'plain' ? 2 : 1),
  });
  const webhook = defineJob({
    kind: 'webhook',
    payload: z.object({ partner: z.string(), n: z.number() }),
    // Without the breaker, the same jobs name no destination: each retries on its own backoff.
    ...(withBreaker ? { destination: (p: { partner: string }) => p.partner } : {}),
    breaker: { coolDownMs: options.breaker.coolDownMs, maxCoolDownMs: options.breaker.coolDownMs * 4 },
    maxAttempts: 6,
    timeoutMs: 2_000,
    backoff: { type: 'exponential', baseMs: 1_000, factor: 2, maxMs: 8_000, jitter: 0 },
    handler: async (p, ctx) => {
      const res = await fetch(`${receiver.url}/hook/${p.partner}/${p.n}`, {
        method: 'POST',
        headers: { 'x-sent-at': String(Date.now()) },
        signal: ctx.signal,
      });
      const info = { response: { status: res.status, body: await res.text() } };
      if (res.ok) return;
      if (res.status === 429)
        throw new RetryAfterError(Number(res.headers.get('retry-after') ?? 5) * 1000, '429', info);
      if (res.status < 500) throw new DiscardError(`rejected with ${res.status}`, info);
      throw new RetryError(`answered ${res.status}`, info);
    },
  });
  const connections = Array.from({ length: options.invocations }, () =>
    connect({ connectionString: options.databaseUrl, max: 2 }),
  );
  try {
    await migrate(setup, { schema });
    const failing = Math.round(options.jobs * options.failingShare);
    await createEnqueuer({ schema }).enqueueMany(
      setup,
      Array.from({ length: options.jobs }, (_, n) =>
        webhook.with({ partner: n < failing ? FAILING : `partner-${1 + (n % (PARTNERS - 1))}`, n }),
      ),
    );
    const started = Date.now();
    const recoveredAt = started + options.downMs;
    receiver.down(recoveredAt);
    const left = async () =>
      Number(
        (await admin.query(`select count(*)::int as n from "${schema}".jobs where state in ('queued', 'running')`))
          .rows[0].n,
      );
    let finishedAt = 0;
    let stop = false;
    const loops = connections.map(async (db) => {
      const worker = createWorker({
        db,
        schema,
        jobs: [webhook],
        concurrency: 10,
        batchSize: 10,
        logger: silentLogger,
        ...(mode === 'rated' ? { destinationRateLimits: { '*': { limit: options.ratePerS, periodMs: 1_000 } } } : {}),
      });
      while (!stop) {
        const summary = await worker.runInvocation({ remainingMs: 15_000 });
        if (summary.claimed === 0) await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    while (true) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      const n = await left();
      if (n === 0) {
        finishedAt = Date.now();
        break;
      }
      if (Date.now() > recoveredAt + options.drainLimitMs) break;
      say(`  ${mode}: t=${Math.round((Date.now() - started) / 1000)}s left=${n}`);
    }
    stop = true;
    await Promise.all(loops);
    const attempts = await admin.query(
      `select coalesce(avg(attempt), 0)::float8 as a from "${schema}".jobs where payload->>'partner' = $1`,
      [FAILING],
    );
    const states = await admin.query(`select state, count(*)::int as n from "${schema}".jobs group by state`);
    const count = (state: string) => states.rows.find((r) => r.state === state)?.n ?? 0;
    const requests = receiver.requests.get(FAILING) ?? [];
    return {
      attempts_per_failing_job: Math.round(Number(attempts.rows[0].a) * 100) / 100,
      dead: count('dead'),
      drain_after_recovery_s: finishedAt ? Math.max(0, Math.round((finishedAt - recoveredAt) / 100) / 10) : -1,
      requests_while_down: requests.filter((t) => t >= started && t < recoveredAt).length,
      lost: count('queued') + count('running'),
      max_requests_per_s: Math.max(0, ...[...receiver.requests.values()].map((times) => busiestWindow(times, 1_000))),
    };
  } finally {
    await receiver.close();
    await admin.query(`drop schema if exists "${schema}" cascade`).catch(() => {});
    await Promise.all([...connections.map((c) => c.close()), setup.close(), admin.end()]);
  }
}
