// Vercel cron (vercel.json: every minute on Pro, daily on Hobby; an idle tick answers from a hint
// without the database): the worker for the queues SKIPLOCK_QUEUES names (all when unset).
// Also started by the enqueue route's nudges (SKIPLOCK_NUDGE_ROUTES) and, with
// SKIPLOCK_MAX_INVOCATIONS, by itself when a backlog needs more invocations (fan-out): those
// requests are accepted at once (202) and run after the response with waitUntil.
// maxDuration: vercel.json. A kind of `reports` too long for 60 s is left to /api/reports-worker
// (slowQueues); a kind of another queue too long for it is refused as the route loads.
import { createVercelWorker } from 'skiplock/vercel';
import { jobs, schedules } from '../functions/jobs.js';

export const GET = createVercelWorker(jobs, { maxDurationMs: 60_000, schedules, slowQueues: ['reports'] });
