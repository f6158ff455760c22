// skiplock on Deno Deploy (docs/deploy-deno.md): every route on Deno.serve, the worker each minute
// and maintenance every 5 minutes with Deno.cron. Variables: DATABASE_URL, SKIPLOCK_DRIVER=neon-http
// (or pg), CRON_SECRET, SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN, SKIPLOCK_SIGNAL_SECRET,
// SKIPLOCK_BASE_URL and SKIPLOCK_NUDGE_ROUTES=*=/skiplock/worker for nudges.
import { serveDeno } from 'skiplock/deno';
import { jobs, schedules } from './functions/jobs.ts';

const app = serveDeno(jobs, { schedules });

// Deadlines, the activity rollup and retention. Deno.cron exists on Deno Deploy, and locally with
// --unstable-cron (deno task start); without it neither cron runs, and a scheduler of your own
// requests /skiplock/worker and /skiplock/maintenance with CRON_SECRET instead.
Deno.cron?.('skiplock maintenance', '*/5 * * * *', async () => {
  await (await app.tick('maintenance')).body?.cancel();
});
