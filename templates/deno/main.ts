// skiplock on Deno Deploy (docs/deploy-deno.md): every route on Deno.serve, the worker each minute
// and maintenance every 10 minutes with Deno.cron (serveDeno's `cron` and `maintenanceCron`).
// Variables: DATABASE_URL, SKIPLOCK_DRIVER=neon-http (or pg), CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN,
// SKIPLOCK_ADMIN_TOKEN, SKIPLOCK_SIGNAL_SECRET, SKIPLOCK_BASE_URL and
// SKIPLOCK_NUDGE_ROUTES=*=/skiplock/worker for nudges. Deno.cron exists on Deno Deploy, and locally
// with --unstable-cron (deno task start); without it neither cron runs, and a scheduler of your own
// requests /skiplock/worker and /skiplock/maintenance with CRON_SECRET instead.
import { serveDeno } from 'skiplock/deno';
import { jobs, schedules } from './functions/jobs.ts';

serveDeno(jobs, { schedules });
