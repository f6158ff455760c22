/**
 * Dev probe for issue 12 (limits, fair share): no-op jobs drained by K invocation loops.
 * 1. throughput: no keys; 1,000 concurrency keys without a limit; the same with keyConcurrency 5;
 *    a queue limit of 50.
 * 2. fair share: a tenant's backlog of PROBE_BIG jobs enqueued first, then 10 jobs of a small tenant:
 *    when the small tenant's last job starts, against the whole drain (with keys, and without).
 * `npx tsx bench/probe-limits.ts [K]`; PROBE_JOBS (20,000), PROBE_BIG (50,000).
 */
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob, defineQueue } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { freshDatabase, openBacklogCounter, vacuumAnalyze } from './db.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const jobs = Number(process.env.PROBE_JOBS ?? 20_000);
const big = Number(process.env.PROBE_BIG ?? 50_000);
const k = Number(process.argv[2] ?? 4);
let smallStartedAt: number | undefined;
const started = { small: 0 };
const run = async (
  label: string,
  queue: string | ReturnType<typeof defineQueue>,
  rows: (n: number) => { key?: string; small?: boolean },
  count: number,
) => {
  const noop = defineJob({
    kind: 'noop',
    queue,
    payload: z.object({ n: z.number(), small: z.boolean().optional() }),
    handler: async (p) => {
      if (p.small && ++started.small === 10) smallStartedAt = performance.now();
    },
  });
  const url = await freshDatabase(server, 'bench_probe_limits');
  const setup = connect({ connectionString: url, max: 2 });
  await migrate(setup);
  const enqueuer = createEnqueuer();
  for (let i = 0; i < count; i += 1000) {
    await enqueuer.enqueueMany(
      setup,
      Array.from({ length: Math.min(1000, count - i) }, (_, j) => {
        const r = rows(i + j);
        return noop.with({ n: i + j, ...(r.small ? { small: true } : {}) }, r.key ? { concurrencyKey: r.key } : {});
      }),
    );
  }
  await vacuumAnalyze(url);
  const check = await openBacklogCounter(url);
  const left = check.left;
  started.small = 0;
  smallStartedAt = undefined;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: k }, async () => {
      const db = connect({ connectionString: url, max: 1 });
      const worker = createWorker({ db, jobs: [noop], concurrency: 100, batchSize: 100, logger: silentLogger });
      while ((await left()) > 0) await worker.runInvocation({ remainingMs: 600_000 });
      await db.close();
    }),
  );
  const ms = performance.now() - t;
  const small =
    smallStartedAt === undefined ? '' : `, small tenant's 10th job started at ${Math.round(smallStartedAt - t)} ms`;
  console.log(`K=${k} ${label}: ${Math.round(count / (ms / 1000))} jobs/s, drained in ${Math.round(ms)} ms${small}`);
  await check.close();
  await setup.close();
};

await run('no keys', 'q', () => ({}), jobs);
await run('1,000 concurrency keys, no limit', 'q', (n) => ({ key: `t${n % 1000}` }), jobs);
await run(
  '1,000 keys, keyConcurrency 5',
  defineQueue({ name: 'q', keyConcurrency: 5 }),
  (n) => ({ key: `t${n % 1000}` }),
  jobs,
);
await run('queue limit 50', defineQueue({ name: 'q', concurrency: 50 }), () => ({}), jobs);
const fair = (keyed: boolean) => (n: number) =>
  n < big ? (keyed ? { key: 'big' } : {}) : { ...(keyed ? { key: 'small' } : {}), small: true };
await run(`fair share: ${big} jobs of one tenant, then 10 of another (concurrency keys)`, 'q', fair(true), big + 10);
await run(`the same without keys (claim order)`, 'q', fair(false), big + 10);
