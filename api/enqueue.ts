// POST /api/enqueue with Authorization: Bearer $SKIPLOCK_ENQUEUE_TOKEN.

import { createVercelEnqueue } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const POST = createVercelEnqueue(jobs);
