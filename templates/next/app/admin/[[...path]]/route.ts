// The operator console at /admin and every page under it. Log in with $SKIPLOCK_ADMIN_TOKEN, or
// $SKIPLOCK_CONSOLE_VIEWER_TOKEN for a read-only session.
import { createVercelConsole } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 30;
// idleHints: a replay or a resume made here wakes the idle cron ticks.
export const GET = createVercelConsole(jobs, { idleHints });
export const POST = GET;
