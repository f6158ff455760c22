// POST /api/enqueue with Authorization: Bearer $SKIPLOCK_ENQUEUE_TOKEN. After each enqueue it
// starts the worker routes SKIPLOCK_NUDGE_ROUTES names for the jobs' queues (bearer CRON_SECRET),
// the requests kept alive after the response with Next's `after`.
import { after } from 'next/server';
import { createVercelEnqueue } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 10;
export const POST = createVercelEnqueue(jobs, { waitUntil: after, idleHints });
