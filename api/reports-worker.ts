// Vercel cron (every minute): a separate worker with a longer budget for slow reports.

import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 300_000, queues: ['reports'] });
