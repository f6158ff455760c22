import * as z from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { connect, type Driver, type NeonOptions, type SkiplockDb } from '../../db/connect.js';
import { captureStatements } from '../../test/helpers/statements.js';
import type { Classes, RunJob } from './measure.js';

/** The statements a step can add (the rest of a job's statements are its claim and settle). */
export const SKIPLOCK_CLASSES: Classes = [
  ['read steps + extend lease', /^with extended as .*left join .*job_steps/s],
  ['record step', /insert into \S*job_steps/],
  ['extend lease', /^with moved as \(\s*update/],
];

const body = async () => {}; // the no-op a step runs
let handlerMs = 0; // how long the last job's handler ran

const stepsJob = defineJob({
  kind: 'bench_steps',
  payload: z.object({ n: z.number(), durable: z.boolean() }),
  handler: async ({ n, durable }, ctx) => {
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      if (durable) await ctx.step(`s${i}`, body);
      else await body();
    }
    handlerMs = performance.now() - started;
  },
});

/**
 * One warm worker on `driver` (as a long-lived function instance would be); each run enqueues one
 * job through `admin` (not counted), runs the invocation that claims it and counts every statement
 * the invocation sends; the time is the handler's (every statement a step adds is sent inside it,
 * and the claim's and settle's own noise stays out).
 */
export function skiplockRunner(
  url: string,
  driver: Driver,
  admin: SkiplockDb,
  neon: NeonOptions,
): { run: RunJob; close(): Promise<void> } {
  const db = connect({ connectionString: url, driver, neon, max: 2 });
  const worker = createWorker({ db, jobs: [stepsJob], logger: silentLogger });
  const enqueuer = createEnqueuer();
  return {
    async run(n, durable) {
      await enqueuer.enqueueMany(admin, [stepsJob.with({ n, durable })]);
      const { result: summary, texts } = await captureStatements(driver, () =>
        worker.runInvocation({ remainingMs: 60_000 }),
      );
      if (summary.completed !== 1)
        throw new Error(`skiplock ${driver}: expected 1 completed job, got ${JSON.stringify(summary)}`);
      return { ms: handlerMs, texts };
    },
    close: () => db.close(),
  };
}
