// POST /api/replay with Authorization: Bearer $SKIPLOCK_ADMIN_TOKEN.
import { jobs } from '../functions/app-jobs.js';
import { createVercelReplay } from '../functions/vercel.js';

export const POST = createVercelReplay(jobs);
