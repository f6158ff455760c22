// The operator console (Lambda) at /admin over the HTTP API. Log in with $SKIPLOCK_ADMIN_TOKEN, or
// $SKIPLOCK_CONSOLE_VIEWER_TOKEN for a read-only session.

import { createLambdaConsole } from 'skiplock/lambda';
import { jobs } from './jobs.js';

export const handler = createLambdaConsole(jobs);
