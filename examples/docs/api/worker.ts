// api/worker.ts of a Vercel app: SKIPLOCK_QUEUES decides the queues (all when unset).

// #region vercel-worker
import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000 }); // = maxDuration in vercel.json
// #endregion vercel-worker
