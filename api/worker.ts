// Vercel cron (every minute): the worker for the e-mail and webhook queues. maxDuration: vercel.json.

import { createVercelWorker } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000, queues: ['emails', 'webhooks'] });
