// main.ts of an app `skiplock init deno` made, with a route of its own beside skiplock's
// (docs/deploy-deno.md). Deno's globals, as far as this example uses them (Deno has them).
declare const Deno: {
  env: { get(name: string): string | undefined };
  cron(name: string, schedule: string, run: () => Promise<void>): void;
  serve(handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Promise<Response>): void;
};

// #region deno-own-routes
import { sql } from 'drizzle-orm';
import { connect, createEnqueuer } from 'skiplock';
import { createDenoApp } from 'skiplock/deno';
import { jobs, schedules } from './functions/jobs.ts';

const skiplock = createDenoApp(jobs, { schedules });
const [sendEmail] = jobs; // the template's send-email kind
const { enqueue } = createEnqueuer();
const { db } = connect({ connectionString: Deno.env.get('DATABASE_URL') ?? '', driver: 'pg' });

async function signUp(request: Request): Promise<Response> {
  const { email } = (await request.json()) as { email: string };
  const job = await db.transaction(async (tx) => {
    await tx.execute(sql`insert into users (email) values (${email})`);
    const welcome = { to: email, subject: 'Welcome', template: 'welcome', idempotencyKey: `welcome-${email}` };
    return enqueue(tx, sendEmail, welcome);
  });
  // After the commit: start the worker now, not at the next minute's Deno.cron.
  await skiplock.nudge([sendEmail.queue], request);
  return Response.json({ job });
}

Deno.cron('skiplock worker', '* * * * *', async () => {
  await (await skiplock.tick('worker')).body?.cancel();
});
Deno.cron('skiplock maintenance', '*/10 * * * *', async () => {
  await (await skiplock.tick('maintenance')).body?.cancel();
});
Deno.serve((request, info) => {
  const url = new URL(request.url);
  if (url.pathname === '/signup' && request.method === 'POST') return signUp(request);
  return skiplock.fetch(request, { client: info.remoteAddr.hostname });
});
// #endregion deno-own-routes
