// The operator console at /admin (vercel.json rewrites /admin and /admin/* here; the request keeps
// its URL). Log in with $SKIPLOCK_ADMIN_TOKEN, or $SKIPLOCK_CONSOLE_VIEWER_TOKEN for a read-only session.

import { createVercelConsole } from 'skiplock/vercel';
import { jobs } from '../functions/jobs.js';

export const GET = createVercelConsole(jobs);
export const POST = GET;
