// skiplock as a Supabase Edge Function (docs/deploy-deno.md), served at /functions/v1/skiplock.
// A pg_cron schedule requests its worker route each minute (supabase/skiplock-cron.sql).
// Secrets (`supabase secrets set`): DATABASE_URL, SKIPLOCK_DRIVER=neon-http or pg, CRON_SECRET,
// SKIPLOCK_ENQUEUE_TOKEN, SKIPLOCK_ADMIN_TOKEN, SKIPLOCK_SIGNAL_SECRET, SKIPLOCK_BASE_URL
// (https://<project>.supabase.co/functions/v1) and SKIPLOCK_NUDGE_ROUTES=*=/skiplock/skiplock/worker.
import { serveDeno } from 'skiplock/deno';
import { jobs, schedules } from '../_shared/jobs.ts';

serveDeno(jobs, {
  schedules,
  basePath: '/skiplock',
  cron: false,
  // Supabase's 2 s per request is CPU time; its wall-time limit is 150 s (400 s on paid plans).
  // The example handlers wait on I/O and use little CPU, so the budget is bounded by wall time and
  // their 10 s and 20 s timeouts fit. A CPU-heavy handler: remove this line to keep the 2 s guard
  // (each kind's timeoutMs must then fit 2 s).
  cpuMs: false,
});
