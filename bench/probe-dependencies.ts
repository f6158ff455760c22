/**
 * Dev probe for issue 14 (dependencies): no-op jobs drained by K invocation loops — independent, in
 * chains of two (each second job after the first), and one fan-in (PROBE_FAN_IN parents, then one
 * child) — so the cost of waiting and releasing shows as jobs/s beside the same work without it.
 * `node .bench/probe-dependencies.mjs [K...]`; PROBE_JOBS (20,000), PROBE_FAN_IN (1,000).
 */
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import type { JobRequest } from '../core/jobs.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { freshDatabase, openBacklogCounter, vacuumAnalyze } from './db.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const jobs = Number(process.env.PROBE_JOBS ?? 20_000);
const fanIn = Number(process.env.PROBE_FAN_IN ?? 1_000);
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
type Shape = 'independent' | 'chains of 2' | 'fan-in';

/** One call's steps: `size` jobs, shaped. */
function steps(shape: Shape, from: number, size: number): Record<string, JobRequest> {
  const out: Record<string, JobRequest> = {};
  for (let i = 0; i < size; i++) {
    const n = from + i;
    const after =
      shape === 'chains of 2' && i % 2 === 1
        ? [`s${n - 1}`]
        : shape === 'fan-in' && i === size - 1
          ? Array.from({ length: size - 1 }, (_, j) => `s${from + j}`)
          : undefined;
    out[`s${n}`] = noop.with({ n }, after ? { after } : {});
  }
  return out;
}

for (const k of process.argv.slice(2).map(Number).length ? process.argv.slice(2).map(Number) : [1, 4]) {
  for (const shape of ['independent', 'chains of 2', 'fan-in'] as const) {
    const url = await freshDatabase(server, 'bench_probe_dependencies');
    const setup = connect({ connectionString: url, max: 2 });
    await migrate(setup);
    const enqueuer = createEnqueuer();
    const total = shape === 'fan-in' ? fanIn + 1 : jobs;
    if (shape === 'fan-in') await enqueuer.enqueueFlow(setup, steps(shape, 0, total));
    else for (let i = 0; i < jobs; i += 1000) await enqueuer.enqueueFlow(setup, steps(shape, i, 1000));
    await vacuumAnalyze(url);
    const check = await openBacklogCounter(url);
    const left = check.left;
    const t = performance.now();
    let invocations = 0;
    await Promise.all(
      Array.from({ length: k }, async () => {
        const db = connect({ connectionString: url, max: 1 });
        const worker = createWorker({ db, jobs: [noop], concurrency: 100, batchSize: 100, logger: silentLogger });
        while ((await left()) > 0) {
          await worker.runInvocation({ remainingMs: 600_000 });
          invocations++;
        }
        await db.close();
      }),
    );
    const ms = performance.now() - t;
    console.log(
      `K=${k} ${shape} (${total} jobs): ${Math.round(total / (ms / 1000))} jobs/s, ${ms.toFixed(0)} ms, ${invocations} invocations`,
    );
    await check.close();
    await setup.close();
  }
}
