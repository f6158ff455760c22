// A Supabase Edge Function serving skiplock (docs/deploy-deno.md).
// #region supabase-function
import { serveDeno } from 'skiplock/deno';
import { jobs } from './jobs.js';

// supabase/functions/skiplock/index.ts, served at /functions/v1/skiplock: a pg_cron schedule
// requests its worker route each minute (Supabase has no Deno.cron). cpuMs: false: its handlers
// wait on I/O (docs/deploy-deno.md, Limits).
serveDeno(jobs, { basePath: '/skiplock', cron: false, cpuMs: false });
// #endregion supabase-function
