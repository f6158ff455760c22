// POST /api/replay with Authorization: Bearer $SKIPLOCK_ADMIN_TOKEN. The replayed jobs' workers are
// nudged (SKIPLOCK_NUDGE_ROUTES), their requests kept alive by Next's `after`.
import { after } from 'next/server';
import { createVercelReplay } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 60;
export const POST = createVercelReplay(jobs, { idleHints, waitUntil: after });
