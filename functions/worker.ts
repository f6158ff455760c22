// Deployable worker (Lambda, scheduled). Which kinds/queues it runs: SKIPLOCK_KINDS, SKIPLOCK_QUEUES.
// Its invocations also tick the recurring schedules (functions/jobs.ts).

import { createLambdaWorker } from 'skiplock/lambda';
import { jobs, schedules } from './jobs.js';

export const handler = createLambdaWorker(jobs, { schedules });
