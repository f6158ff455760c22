// A Supabase Edge Function serving skiplock (docs/deploy-deno.md).
// #region supabase-function
import { serveDeno } from 'skiplock/deno';
import { jobs } from './jobs.js';

// supabase/functions/skiplock/index.ts, served at /functions/v1/skiplock: a pg_cron schedule
// requests its worker route each minute (Supabase has no Deno.cron).
serveDeno(jobs, { basePath: '/skiplock', cron: false });
// #endregion supabase-function
