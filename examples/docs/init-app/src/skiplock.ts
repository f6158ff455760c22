// src/skiplock.ts of an app `skiplock init cloudflare` made, with a route of its own beside
// skiplock's (docs/deploy-cloudflare.md).
// #region cloudflare-own-routes
import { neon, neonConfig } from '@neondatabase/serverless';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/neon-http';
import { createEnqueuer } from 'skiplock';
import { type CloudflareContext, type CloudflareEnv, createCloudflareWorker } from 'skiplock/cloudflare';
import { jobs, schedules } from '../functions/jobs.js';

const skiplock = createCloudflareWorker(jobs, { schedules, maintenanceCron: '*/5 * * * *', cpuMs: 30_000 });
const [sendEmail] = jobs; // the template's send-email kind
const { prepareEnqueue } = createEnqueuer();

async function signUp(request: Request, env: CloudflareEnv, ctx: CloudflareContext): Promise<Response> {
  const { email } = (await request.json()) as { email: string };
  // Locally, Neon's HTTP stand-in; on Cloudflare the variable is unset and the driver talks to Neon.
  if (typeof env.SKIPLOCK_NEON_FETCH_ENDPOINT === 'string') neonConfig.fetchEndpoint = env.SKIPLOCK_NEON_FETCH_ENDPOINT;
  const db = drizzle({ client: neon(env.DATABASE_URL as string) });
  const welcome = { to: email, subject: 'Welcome', template: 'welcome', idempotencyKey: `welcome-${email}` };
  const pending = prepareEnqueue([sendEmail.with(welcome)]);
  // One batch is one transaction: the user and the job commit together or not at all.
  const [, ...raw] = await db.batch([
    db.execute(sql`insert into users (email) values (${email})`),
    ...pending.statements.map((s) => db.execute(s)),
  ]);
  const [job] = pending.read(raw);
  // After the commit: start the worker now (through SKIPLOCK_SELF), not at the next Cron Trigger.
  await skiplock.nudge([sendEmail.queue], request, env, ctx);
  return Response.json({ job });
}

export default {
  fetch(request: Request, env: CloudflareEnv, ctx: CloudflareContext): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/signup' && request.method === 'POST') return signUp(request, env, ctx);
    return skiplock.fetch(request, env, ctx);
  },
  scheduled: skiplock.scheduled,
};
// #endregion cloudflare-own-routes
