// functions/worker.ts of a Lambda app (what `npx skiplock init lambda` writes).

// #region lambda-worker
import { createLambdaWorker } from 'skiplock/lambda';
import { jobs, schedules } from './jobs.js';

// Which queues and kinds it runs: SKIPLOCK_QUEUES, SKIPLOCK_KINDS (all when unset). Its scheduled
// invocations also tick the recurring schedules (docs/schedules.md): no cron of their own.
export const handler = createLambdaWorker(jobs, { schedules });
// #endregion lambda-worker
