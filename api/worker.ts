// Vercel cron (every minute): the worker for the e-mail and webhook queues. maxDuration: vercel.json.
import { jobs } from '../functions/app-jobs.js';
import { createVercelWorker } from '../functions/vercel.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000, queues: ['emails', 'webhooks'] });
