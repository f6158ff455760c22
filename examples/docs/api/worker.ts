// api/worker.ts of a Vercel app: SKIPLOCK_QUEUES decides the queues (all when unset); the kinds of
// `reports` too long for its 60 s are left to api/reports-worker.ts.

// #region vercel-worker
import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

// maxDurationMs = maxDuration in vercel.json
export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000, slowQueues: ['reports'] });
// #endregion vercel-worker
