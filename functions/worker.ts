// Deployable worker (Lambda, scheduled). Which kinds/queues it runs: SKIPLOCK_KINDS, SKIPLOCK_QUEUES.
import { jobs } from './app-jobs.js';
import { createLambdaWorker } from './lambda.js';

export const handler = createLambdaWorker(jobs);
