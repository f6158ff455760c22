// api/reports-worker.ts of a Vercel app: a route dedicated to the slow queue names it in code.

// #region vercel-reports-worker
import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 300_000, queues: ['reports'] });
// #endregion vercel-reports-worker
