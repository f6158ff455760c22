// functions/worker.ts of a Lambda app (what `npx skiplock init lambda` writes).

// #region lambda-worker
import { createLambdaWorker } from 'skiplock/lambda';
import { jobs } from './jobs.js';

// Which queues and kinds it runs: SKIPLOCK_QUEUES, SKIPLOCK_KINDS (all when unset).
export const handler = createLambdaWorker(jobs);
// #endregion lambda-worker
