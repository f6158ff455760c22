/**
 * `npm run example:flow`: jobs that wait for others. A flow — fetch two sources, then build a report
 * from both — enqueued in one statement; one worker invocation runs each step once its parents
 * completed, and the report reads their results. Then a flow whose first step dies: the steps after
 * it are cancelled, and replaying the dead step brings them back. Uses DATABASE_URL, or an embedded
 * Postgres.
 */
import { connect, createWorker, defineJob, enqueueFlow, getJob, migrate, replay } from 'skiplock';
import { z } from 'zod';
import { resolveDevDatabase } from '../scripts/local-postgres.js';

let sourceDown = true;

// #region flow-kinds
const fetchSource = defineJob({
  kind: 'fetch-source',
  payload: z.object({ source: z.string() }),
  maxAttempts: 1,
  timeoutMs: 10_000,
  handler: async ({ source }) => {
    if (source === 'flaky' && sourceDown) throw new Error('source unavailable');
    return { source, rows: source.length * 100 }; // stored as the job's result
  },
});

const buildReport = defineJob({
  kind: 'build-report',
  payload: z.object({ title: z.string() }),
  timeoutMs: 10_000,
  handler: async ({ title }, ctx) => {
    // The parents, in the order `after` named them, each with its state and result.
    const parents = await ctx.parents();
    const rows = parents.reduce((sum, p) => sum + (p.result as { rows: number }).rows, 0);
    return { title, rows };
  },
});
// #endregion flow-kinds

const database = await resolveDevDatabase();
const db = connect({ connectionString: database.url });
try {
  await migrate(db);
  const worker = createWorker({ db, jobs: [fetchSource, buildReport] });

  // #region flow-enqueue
  // One statement: all three jobs or none. `after` names other steps (or ids of existing jobs).
  const flow = await enqueueFlow(db, {
    orders: fetchSource.with({ source: 'orders' }),
    refunds: fetchSource.with({ source: 'refunds' }),
    report: buildReport.with({ title: 'daily' }, { after: ['orders', 'refunds'] }),
  });
  await worker.runInvocation({ remainingMs: 30_000 }); // fetches both, then the report
  console.log('report', (await getJob(db, flow.report.id))?.result); // { title: 'daily', rows: 1300 }
  // #endregion flow-enqueue

  // #region flow-failure
  // A parent that dies cancels what waits for it (dead_reason 'dependency_failed'), transitively.
  const failing = await enqueueFlow(db, {
    fetch: fetchSource.with({ source: 'flaky' }),
    report: buildReport.with({ title: 'flaky' }, { after: ['fetch'] }),
  });
  await worker.runInvocation({ remainingMs: 30_000 });
  const cancelled = await getJob(db, failing.report.id);
  console.log('after the failure:', cancelled?.state, cancelled?.deadReason); // cancelled dependency_failed

  // Replaying the dead parent brings its cancelled children back to wait for it again.
  sourceDown = false;
  await replay(db, { ids: [failing.fetch.id], by: 'example' });
  await worker.runInvocation({ remainingMs: 30_000 });
  console.log('after the replay:', (await getJob(db, failing.report.id))?.result); // { title: 'flaky', rows: 500 }
  // #endregion flow-failure
} finally {
  await db.close();
  await database.stop();
}
