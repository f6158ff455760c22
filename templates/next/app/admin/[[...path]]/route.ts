// The operator console at /admin and every page under it. Log in with $SKIPLOCK_ADMIN_TOKEN, or
// $SKIPLOCK_CONSOLE_VIEWER_TOKEN for a read-only session.
import { createVercelConsole } from 'skiplock/vercel';
import { jobs } from '../../../functions/jobs';

export const maxDuration = 30;
export const GET = createVercelConsole(jobs);
export const POST = GET;
