// functions/enqueue.ts, functions/replay.ts and functions/maintenance.ts of a Lambda app, in one file here.

// #region lambda-entries
import { createLambdaEnqueue, createLambdaMaintenance, createLambdaReplay } from 'skiplock/lambda';
import { jobs } from './jobs.js';

export const enqueueHandler = createLambdaEnqueue(jobs); // functions/enqueue.ts: `export const handler = …`
export const replayHandler = createLambdaReplay(jobs); // functions/replay.ts
export const maintenanceHandler = createLambdaMaintenance(); // functions/maintenance.ts
// #endregion lambda-entries
