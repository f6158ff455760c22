// Vercel cron (every minute on Pro; on Hobby none: nudges, and /api/worker's daily tick): a separate
// worker with a longer budget for slow reports. Vercel's variables are project-wide, so this route
// names its queue in code (which wins over SKIPLOCK_QUEUES).
import { after } from 'next/server';
import { createVercelWorker } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 300;
export const GET = createVercelWorker(jobs, {
  maxDurationMs: maxDuration * 1000,
  queues: ['reports'],
  waitUntil: after,
  idleHints,
});
