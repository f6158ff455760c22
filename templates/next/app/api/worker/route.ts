// Vercel cron (vercel.json: every minute on Pro, daily on Hobby; an idle tick answers from a hint
// without the database): the worker for the queues SKIPLOCK_QUEUES names (all when
// unset). Also started by the enqueue route's nudges (SKIPLOCK_NUDGE_ROUTES) and, with
// SKIPLOCK_MAX_INVOCATIONS, by itself when a backlog needs more invocations (fan-out): those
// requests are accepted at once (202) and run after the response, kept alive with Next's `after`.
// A kind of `reports` too long for 60 s is left to /api/reports-worker (slowQueues); a kind of
// another queue too long for it is refused as the route loads (next build says which).
import { after } from 'next/server';
import { createVercelWorker } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs, schedules } from '../../../functions/jobs';

export const maxDuration = 60;
export const GET = createVercelWorker(jobs, {
  maxDurationMs: maxDuration * 1000,
  schedules,
  slowQueues: ['reports'],
  waitUntil: after,
  idleHints,
});
