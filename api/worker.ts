// Vercel cron (every minute): the worker for the queues SKIPLOCK_QUEUES names (all when unset).
// maxDuration: vercel.json.
import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000 });
