// Deployable worker (Lambda, scheduled). Which kinds/queues it runs: SKIPLOCK_KINDS, SKIPLOCK_QUEUES.

import { createLambdaWorker } from 'skiplock/lambda';
import { jobs } from './jobs.js';

export const handler = createLambdaWorker(jobs);
