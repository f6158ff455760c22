/**
 * Dev probe for issue 12 (ordering keys): no-op jobs drained by K invocation loops, without keys and
 * with PROBE_KEYS keys (jobs spread round-robin, so each key's jobs run one after another).
 * `node .bench/probe-ordering.mjs [K...]`; PROBE_JOBS (20,000), PROBE_KEYS (1,000).
 */
import * as z from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { createWorker } from '../core/worker/index.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { freshDatabase, openBacklogCounter, vacuumAnalyze } from './db.js';

const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const jobs = Number(process.env.PROBE_JOBS ?? 20_000);
const keys = Number(process.env.PROBE_KEYS ?? 1_000);
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
for (const k of process.argv.slice(2).map(Number).length ? process.argv.slice(2).map(Number) : [4, 16]) {
  for (const keyed of [false, true]) {
    const url = await freshDatabase(server, 'bench_probe_ordering');
    const setup = connect({ connectionString: url, max: 2 });
    await migrate(setup);
    const enqueuer = createEnqueuer();
    for (let i = 0; i < jobs; i += 1000) {
      await enqueuer.enqueueMany(
        setup,
        Array.from({ length: 1000 }, (_, j) =>
          noop.with({ n: i + j }, keyed ? { orderingKey: `key-${(i + j) % keys}` } : {}),
        ),
      );
    }
    await vacuumAnalyze(url);
    const check = await openBacklogCounter(url);
    const left = check.left;
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
    console.log(`K=${k} ${keyed ? `${keys} keys` : 'no keys'}: ${Math.round(jobs / (ms / 1000))} jobs/s`);
    await check.close();
    await setup.close();
  }
}
