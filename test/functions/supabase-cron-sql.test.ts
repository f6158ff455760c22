import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { PLATFORM_SECRETS } from '../helpers/platforms.js';

// templates/supabase/skiplock-cron.sql, run on this machine's Postgres as far as it allows: pg_cron and
// pg_net are not installed here (pg_cron needs shared_preload_libraries and a restart), so a schema
// of stand-ins takes their place — `cron.schedule` records each job, `net.http_get` records the
// request it would send, `vault.decrypted_secrets` holds the secret — and each recorded command is
// then run as pg_cron runs it. What it must send is what test/functions/platform-deno.test.ts shows
// the function accepts: GET of its worker route with the bearer CRON_SECRET and the start header.
let t: TestContext;
useTestSchema('supabase-cron-sql', (ctx) => {
  t = ctx;
});

const TEMPLATE = readFileSync('templates/supabase/skiplock-cron.sql', 'utf8');

/** Stand-ins for pg_cron, pg_net and Vault in their own schemas, prefixed so runs do not collide. */
function standIns(prefix: string): string {
  return `
    create schema ${prefix}cron;
    create table ${prefix}cron.job (jobname text primary key, schedule text not null, command text not null);
    create function ${prefix}cron.schedule(name text, schedule text, command text) returns bigint
      language sql as $f$
        insert into ${prefix}cron.job values (name, schedule, command)
          on conflict (jobname) do update set schedule = excluded.schedule, command = excluded.command;
        select 1::bigint;
      $f$;
    create schema ${prefix}net;
    create table ${prefix}net.sent (url text not null, headers jsonb not null, timeout_milliseconds int not null);
    create function ${prefix}net.http_get(url text, headers jsonb, timeout_milliseconds int) returns bigint
      language sql as $f$
        insert into ${prefix}net.sent values (url, headers, timeout_milliseconds);
        select 1::bigint;
      $f$;
    create schema ${prefix}vault;
    create table ${prefix}vault.decrypted_secrets (name text primary key, decrypted_secret text not null);
    insert into ${prefix}vault.decrypted_secrets values ('skiplock_cron_secret', '${PLATFORM_SECRETS.CRON_SECRET}');
  `;
}

/** The template with the extensions' schemas pointed at the stand-ins and CREATE EXTENSION left out. */
function againstStandIns(sql: string, prefix: string): string {
  return sql
    .replace(/^create extension .*$/gm, '')
    .replace(/\bcron\./g, `${prefix}cron.`)
    .replace(/\bnet\./g, `${prefix}net.`)
    .replace(/\bvault\./g, `${prefix}vault.`);
}

describe('templates/supabase/skiplock-cron.sql', () => {
  it('needs pg_cron and pg_net, and reads the secret from Vault, never from the SQL', () => {
    expect(TEMPLATE).toMatch(/^create extension if not exists pg_cron;$/m);
    expect(TEMPLATE).toMatch(/^create extension if not exists pg_net;$/m);
    expect(TEMPLATE).not.toContain(PLATFORM_SECRETS.CRON_SECRET);
    expect(TEMPLATE).toContain('vault.decrypted_secrets');
  });

  it('schedules the worker each minute and maintenance every 5 minutes; each command sends the request the function accepts', async () => {
    const prefix = `${t.schema}_`;
    const client = await t.admin.connect();
    try {
      await client.query('begin');
      await client.query(standIns(prefix));
      await client.query(againstStandIns(TEMPLATE, prefix));
      const { rows: jobs } = await client.query(
        `select jobname, schedule, command from ${prefix}cron.job order by jobname`,
      );
      expect(jobs.map(({ jobname, schedule }) => ({ jobname, schedule }))).toEqual([
        { jobname: 'skiplock-maintenance', schedule: '*/5 * * * *' },
        { jobname: 'skiplock-worker', schedule: '* * * * *' },
      ]);
      // Each tick, pg_cron runs the command as it stands.
      for (const job of jobs) await client.query(job.command);
      const { rows: sent } = await client.query(`select url, headers, timeout_milliseconds from ${prefix}net.sent`);
      const bearer = `Bearer ${PLATFORM_SECRETS.CRON_SECRET}`;
      expect(sent).toEqual([
        {
          url: 'https://<project>.supabase.co/functions/v1/skiplock/skiplock/maintenance',
          headers: { authorization: bearer },
          timeout_milliseconds: 60_000,
        },
        {
          url: 'https://<project>.supabase.co/functions/v1/skiplock/skiplock/worker',
          // A started run: the function answers 202 at once (platform-deno.test.ts), so pg_net's 5 s
          // timeout never cuts the invocation short.
          headers: { authorization: bearer, 'x-skiplock-start': 'nudge' },
          timeout_milliseconds: 5_000,
        },
      ]);
    } finally {
      await client.query('rollback');
      client.release();
    }
  });
});
