// POST /api/enqueue with Authorization: Bearer $SKIPLOCK_ENQUEUE_TOKEN.
import { jobs } from '../functions/app-jobs.js';
import { createVercelEnqueue } from '../functions/vercel.js';

export const POST = createVercelEnqueue(jobs);
