// Vercel cron (every minute): a separate worker with a longer budget for slow reports.
import { jobs } from '../functions/app-jobs.js';
import { createVercelWorker } from '../functions/vercel.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 300_000, queues: ['reports'] });
