// The operator console at /admin and every page under it. Log in with $SKIPLOCK_ADMIN_TOKEN, or
// $SKIPLOCK_CONSOLE_VIEWER_TOKEN for a read-only session.
import { after } from 'next/server';
import { createVercelConsole } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 30;
// A replay or a resume made here marks the idle ticks' hint (idleHints) and nudges the worker routes
// (SKIPLOCK_NUDGE_ROUTES), their requests kept alive by Next's `after`.
export const GET = createVercelConsole(jobs, { idleHints, waitUntil: after });
export const POST = GET;
