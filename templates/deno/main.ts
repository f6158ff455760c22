// skiplock on Deno Deploy (docs/deploy-deno.md): every route on Deno.serve, the worker each minute
// with Deno.cron. Variables: DATABASE_URL, SKIPLOCK_DRIVER=neon-http (or pg), CRON_SECRET,
// SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN, SKIPLOCK_SIGNAL_SECRET, SKIPLOCK_BASE_URL and
// SKIPLOCK_NUDGE_ROUTES=*=/skiplock/worker for nudges.
import { serveDeno } from 'skiplock/deno';
import { jobs, schedules } from './functions/jobs.ts';

serveDeno(jobs, { schedules });
