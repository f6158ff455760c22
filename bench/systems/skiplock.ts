import pg from 'pg';
import * as z from 'zod';
import type { Completion } from '../../base/outcomes.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { connect, type SkiplockDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { waitUntilDrained } from '../db.js';
import { type BenchSystem, type Flow, flowKey } from './types.js';

// An async no-op, as the peers' handlers are: the same promise per job for every system.
const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: async () => {} });
/** The same job in a queue with a per-key limit (the flow phase's `perKey`). */
const limited = (perKey: number) =>
  defineJob({
    kind: 'noop',
    queue: defineQueue({ name: 'bench', keyConcurrency: perKey }),
    payload: z.object({ n: z.number() }),
    handler: async () => {},
  });

const MAX_INVOCATIONS = 64;

/**
 * skiplock: K invocation loops, each with its own connection, batch = concurrency = BATCH.
 * `completion` is the worker's completedJobs: keep (the default) or delete.
 */
export function skiplockSystem(
  batch = 100,
  completion: Completion = 'keep',
  connections = 1,
  flow?: Flow,
): BenchSystem {
  let url = '';
  let db: SkiplockDb | undefined;
  const enqueuer = createEnqueuer();
  const job = flow?.mode === 'perKey' ? limited(flow.perKey) : noop;
  const keyed = (n: number) =>
    flow === undefined
      ? {}
      : flow.mode === 'ordering'
        ? { orderingKey: flowKey(flow, n) }
        : { concurrencyKey: flowKey(flow, n) };
  return {
    name: completion === 'keep' ? 'skiplock' : 'skiplock (delete)',
    settings: {
      ...(flow ? { flow } : {}),
      driver: 'pg',
      loops: 'K',
      perLoop: { concurrency: batch, batchSize: batch, connections },
      logger: 'silent',
      completedJobs: completion,
      maxInvocations: MAX_INVOCATIONS,
    },
    async setup(target) {
      url = target;
      db = connect({ connectionString: url, max: 2 });
      await migrate(db);
    },
    async enqueueSingle(n) {
      for (let i = 0; i < n; i++) await enqueuer.enqueue(db as SkiplockDb, job, { n: i }, keyed(i));
    },
    async enqueueBulk(n, size) {
      for (let i = 0; i < n; i += size) {
        await enqueuer.enqueueMany(
          db as SkiplockDb,
          Array.from({ length: Math.min(size, n - i) }, (_, j) => job.with({ n: i + j }, keyed(i + j))),
        );
      }
    },
    async process(k) {
      await Promise.all(
        Array.from({ length: k }, async () => {
          const own = connect({ connectionString: url, max: connections });
          const worker = createWorker({
            db: own,
            jobs: [job],
            concurrency: batch,
            batchSize: batch,
            logger: silentLogger,
            completedJobs: completion,
            // Counted invocations, as deployed workers are (SKIPLOCK_MAX_INVOCATIONS): with more
            // than a few running, each claims from its own lane.
            maxInvocations: MAX_INVOCATIONS,
          });
          try {
            while (true) {
              const summary = await worker.runInvocation({ remainingMs: 600_000 });
              // A failed invocation leaves its jobs to lease expiry: say so instead of waiting.
              if (summary.stoppedBecause === 'error') throw new Error(`invocation failed: ${summary.error}`);
              if (summary.claimed === 0) break;
            }
          } finally {
            await own.close();
          }
        }),
      );
      await waitUntilDrained(url);
    },
    async teardown() {
      await db?.close();
    },
  };
}

/**
 * `system` with skiplock.jobs' fillfactor set to `fillfactor` after its migrations, as an operator
 * following docs/performance.md would (it applies to the rows inserted afterwards).
 */
export function withFillfactor(system: BenchSystem, fillfactor: number): BenchSystem {
  return {
    ...system,
    name: `${system.name} (fillfactor ${fillfactor})`,
    settings: { ...system.settings, fillfactor },
    async setup(url) {
      await system.setup(url);
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`alter table skiplock.jobs set (fillfactor = ${Math.trunc(fillfactor)})`);
      } finally {
        await client.end();
      }
    },
  };
}
