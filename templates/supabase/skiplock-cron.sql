-- Runs the skiplock Edge Function's worker each minute, and its maintenance every 5 minutes, with
-- pg_cron and pg_net (both on Supabase: Database → Extensions). The CRON_SECRET the function checks
-- is read from Vault, never written into the job: first
--   select vault.create_secret('<the CRON_SECRET>', 'skiplock_cron_secret');
-- and replace <project> below with your project's reference.
create extension if not exists pg_cron;
create extension if not exists pg_net;

select cron.schedule(
  'skiplock-worker',
  '* * * * *',
  $$
  select net.http_get(
    url := 'https://<project>.supabase.co/functions/v1/skiplock/skiplock/worker',
    -- A started run: the function answers 202 at once and runs on with EdgeRuntime.waitUntil, so
    -- pg_net's request never waits for (or cuts short) the invocation.
    headers := jsonb_build_object(
      'authorization', 'Bearer ' || (select decrypted_secret from vault.decrypted_secrets where name = 'skiplock_cron_secret'),
      'x-skiplock-start', 'nudge'
    ),
    timeout_milliseconds := 5000
  );
  $$
);

select cron.schedule(
  'skiplock-maintenance',
  '*/5 * * * *',
  $$
  select net.http_get(
    url := 'https://<project>.supabase.co/functions/v1/skiplock/skiplock/maintenance',
    headers := jsonb_build_object(
      'authorization', 'Bearer ' || (select decrypted_secret from vault.decrypted_secrets where name = 'skiplock_cron_secret')
    ),
    timeout_milliseconds := 60000
  );
  $$
);
