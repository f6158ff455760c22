// POST /api/enqueue with Authorization: Bearer $SKIPLOCK_ENQUEUE_TOKEN. After each enqueue it
// starts the worker routes SKIPLOCK_NUDGE_ROUTES names for the jobs' queues (bearer CRON_SECRET).

import { createVercelEnqueue } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const POST = createVercelEnqueue(jobs);
