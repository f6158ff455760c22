// netlify/functions/signup.ts of an app `skiplock init netlify` made: a function of its own that
// enqueues in its transaction and starts the background worker at once (docs/deploy-netlify.md).
// #region netlify-own-function
import { sql } from 'drizzle-orm';
import { connect, createEnqueuer } from 'skiplock';
import { createNetlifyNudger, type NetlifyContext } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

const [sendEmail] = jobs; // the template's send-email kind
const { db } = connect({ connectionString: process.env.DATABASE_URL ?? '', driver: 'pg' });
const { enqueue } = createEnqueuer();
const skiplock = createNetlifyNudger();

export default async (request: Request, context: NetlifyContext): Promise<Response> => {
  const { email } = (await request.json()) as { email: string };
  const job = await db.transaction(async (tx) => {
    await tx.execute(sql`insert into users (email) values (${email})`);
    const welcome = { to: email, subject: 'Welcome', template: 'welcome', idempotencyKey: `welcome-${email}` };
    return enqueue(tx, sendEmail, welcome);
  });
  // After the commit: start the background worker now, not at the next scheduled minute.
  await skiplock.nudge([sendEmail.queue], request, context);
  return Response.json({ job });
};

export const config = { path: '/signup' };
// #endregion netlify-own-function
