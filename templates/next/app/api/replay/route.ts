// POST /api/replay with Authorization: Bearer $SKIPLOCK_ADMIN_TOKEN.
import { createVercelReplay } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 60;
export const POST = createVercelReplay(jobs, { idleHints });
