/**
 * `npm run example:steps`: durable steps. An onboarding sequence — a welcome mail, a durable sleep of
 * three days, a wait for an 'activated' signal, then tips or a reminder — and a report built in steps
 * whose build step fails once: its retry reuses the data collected before, and the report's row is
 * written exactly once. Time passes for real: one user keeps the three days (its job stays asleep),
 * the others get a few milliseconds through their payload. Uses DATABASE_URL, or an embedded Postgres.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as pause } from 'node:timers/promises';
import { and, count, eq, sql } from 'drizzle-orm';
import { integer, pgTable, serial, text } from 'drizzle-orm/pg-core';
import {
  connect,
  createSignalToken,
  createWorker,
  defineJob,
  enqueue,
  getJob,
  migrate,
  StepSuspension,
  signal,
  silentLogger,
} from 'skiplock';
import { createVercelSignal, resetSharedRuntime } from 'skiplock/vercel';
import { z } from 'zod';
import { resolveDevDatabase } from '../scripts/local-postgres.js';

// The application's own table, written by the report's transactional step.
const reports = pgTable('example_reports', {
  id: serial('id').primaryKey(),
  jobId: text('job_id').notNull(),
  month: text('month').notNull(),
  file: text('file').notNull(),
  orders: integer('orders').notNull(),
});

// Stand-ins for the outside world: each prints what it does and counts its calls.
const mails: string[] = [];
function sendMail(to: string, subject: string): { messageId: string } {
  mails.push(`${to}: ${subject}`);
  console.log(`  mail → ${to}: ${subject}`);
  return { messageId: `msg-${mails.length}` };
}
const ran = { collect: 0, build: 0 };
function collectOrders(month: string) {
  ran.collect++;
  console.log(`  collect: the orders of ${month} (collect call ${ran.collect})`);
  return { month, orders: 1_204, refunds: 17 };
}
function renderCsv(data: { month: string; orders: number }) {
  ran.build++;
  if (ran.build === 1) {
    console.log('  build: the renderer crashed; the step will run again on its own attempts');
    throw new Error('renderer crashed');
  }
  console.log(`  build: report-${data.month}.csv (build call ${ran.build})`);
  return { name: `report-${data.month}.csv`, bytes: 48_213 };
}

// #region onboarding-kind
const DAY = 86_400_000;
const THREE_DAYS = 3 * DAY;
const A_WEEK = 7 * DAY;

const onboarding = defineJob({
  kind: 'onboarding',
  payload: z.object({
    user: z.string(),
    // Three days asleep, then a week to activate; the example passes milliseconds for some users.
    sleepMs: z.number().int().min(0).default(THREE_DAYS),
    activationTimeoutMs: z.number().int().min(1).default(A_WEEK),
  }),
  timeoutMs: 10_000,
  handler: async ({ user, sleepMs, activationTimeoutMs }, ctx) => {
    await ctx.step('welcome', () => sendMail(user, 'Welcome aboard'));
    // The job leaves the invocation and is claimed again once the time has come: no attempt used.
    await ctx.sleep('settle-in', sleepMs);
    // Back in the queue until a signal on the key comes (signal(db, key, payload)) or the timeout.
    const activated = await ctx.waitForSignal<{ plan: string }>('activated', {
      key: `activated:${user}`,
      timeoutMs: activationTimeoutMs,
    });
    if (activated.timedOut) {
      await ctx.step('reminder', () => sendMail(user, 'Need a hand getting started?'));
      return { user, activated: false };
    }
    await ctx.step('tips', () => sendMail(user, `Tips for the ${activated.payload.plan} plan`));
    return { user, activated: true, plan: activated.payload.plan };
  },
});
// #endregion onboarding-kind

// #region report-kind
const monthlyReport = defineJob({
  kind: 'monthly-report',
  payload: z.object({ month: z.string() }),
  timeoutMs: 10_000,
  handler: async ({ month }, ctx) => {
    // A completed step is never run again: a retry gets its stored result (as JSON).
    const data = await ctx.step('collect', () => collectOrders(month));
    const file = await ctx.step('build', () => renderCsv(data), {
      maxAttempts: 3, // this step's own attempts; the job's are not used
      backoff: { type: 'constant', delayMs: 100 },
    });
    // The row and the step's result (its id) commit in one transaction, fenced on the lease: once.
    const reportId = await ctx.step('store', { transaction: true }, async (tx) => {
      const [row] = await tx
        .insert(reports)
        .values({ jobId: ctx.id, month, file: file.name, orders: data.orders })
        .returning({ id: reports.id });
      return row!.id;
    });
    // #region rethrow
    try {
      await ctx.step('notify', () => sendMail('finance@example.com', `The ${month} report is ready (#${reportId})`));
    } catch (err) {
      if (err instanceof StepSuspension) throw err; // the job is leaving this invocation: let it go
      ctx.logger.warn('report_notify_failed', { reportId }); // best effort: the report is stored
    }
    // #endregion rethrow
    return { reportId, file: file.name };
  },
});
// #endregion report-kind

// #region approval-kind
// The link's base: your app's public URL (the signal route is api/signal.ts on Vercel).
const APP_URL = process.env.APP_URL ?? 'https://app.example.com';

const approval = defineJob({
  kind: 'approval',
  payload: z.object({ orderId: z.string() }),
  timeoutMs: 10_000,
  handler: async ({ orderId }, ctx) => {
    // Inside a step, so a retry mails the same link rather than a second one.
    await ctx.step('ask-approval', () => {
      const token = createSignalToken(process.env.SKIPLOCK_SIGNAL_SECRET, `approve:${orderId}`, {
        expiresInMs: 3 * DAY, // default 7 days, at most 90
      });
      return sendMail('manager@example.com', `Approve order ${orderId}: ${APP_URL}/api/signal?token=${token}`);
    });
    const answer = await ctx.waitForSignal<{ approved: boolean }>('approval', {
      key: `approve:${orderId}`,
      timeoutMs: 3 * DAY,
    });
    return { orderId, approved: !answer.timedOut && answer.payload.approved };
  },
});
// #endregion approval-kind

const check = (ok: boolean, what: string) => {
  if (!ok) throw new Error(`unexpected: ${what}`);
};

const database = await resolveDevDatabase();
const db = connect({ connectionString: database.url });
try {
  await migrate(db);
  await db.db.execute(sql`create table if not exists example_reports (
    id serial primary key, job_id text not null, month text not null, file text not null, orders int not null)`);
  const worker = createWorker({ db, jobs: [onboarding, monthlyReport, approval], logger: silentLogger });
  const job = async (id: string) => (await getJob(db, id))!;
  /** Runs worker invocations until `done()`, 50 ms apart: sleeps, timeouts and backoffs pass for real. */
  const runUntil = async (what: string, done: () => Promise<boolean>) => {
    for (let i = 0; i < 100; i++) {
      await worker.runInvocation({ remainingMs: 30_000 });
      if (await done()) return;
      await pause(50);
    }
    throw new Error(`unexpected: still not ${what} after 100 invocations`);
  };

  console.log('Onboarding: a welcome mail, three days asleep, a wait for "activated", then tips or a reminder');
  // ada keeps the three days: her job goes to sleep, back in the queue, until then.
  const ada = await enqueue(db, onboarding, { user: 'ada' });
  await worker.runInvocation({ remainingMs: 30_000 });
  const asleep = await job(ada.id!);
  const days = (asleep.runAt.getTime() - Date.now()) / DAY;
  check(asleep.state === 'queued' && asleep.attempt === 0 && Math.abs(days - 3) < 0.01, 'ada is not asleep for 3 days');
  console.log(
    `ada: asleep for ${days.toFixed(2)} days: ${asleep.state}, attempt ${asleep.attempt}, run_at ${asleep.runAt.toISOString()}`,
  );

  // bo and cy get 50 ms of sleep through their payload; cy waits at most 500 ms for her signal.
  const bo = await enqueue(db, onboarding, { user: 'bo', sleepMs: 50 });
  const cy = await enqueue(db, onboarding, { user: 'cy', sleepMs: 50, activationTimeoutMs: 500 });
  // getJob lists the steps a job reached: a wait that has not ended is 'waiting', with its key.
  const waitingStep = async (id: string) => (await job(id)).steps?.find((s) => s.state === 'waiting');
  await runUntil(
    'waiting',
    async () => (await waitingStep(bo.id!)) !== undefined && (await waitingStep(cy.id!)) !== undefined,
  );
  for (const [user, id] of [
    ['bo', bo.id!],
    ['cy', cy.id!],
  ] as const) {
    const { state, attempt } = await job(id);
    const wait = (await waitingStep(id))!;
    console.log(
      `${user}: slept 50 ms, now waiting for "${wait.signalKey}" until ${wait.timeoutAt?.toISOString()}: ${state}, attempt ${attempt}`,
    );
  }

  // #region onboarding-signal
  // In the request that activates the account (in its transaction, if you pass one: the signal
  // exists only if it commits). It wakes the waiting job at once; one sent before is kept.
  const sent = await signal(db, 'activated:bo', { plan: 'pro' });
  // #endregion onboarding-signal
  check(sent.woken === 1, 'the signal woke no job');
  console.log(`signal activated:bo → woke ${sent.woken} waiting job`);
  await runUntil('bo completed', async () => (await job(bo.id!)).state === 'completed');
  const boDone = await job(bo.id!);
  const boResult = boDone.result as { activated: boolean; plan?: string };
  check(boResult.activated && boResult.plan === 'pro', 'bo did not get the tips for the pro plan');
  console.log(`bo: completed, activated on the ${boResult.plan} plan (attempt ${boDone.attempt})`);

  await runUntil('cy completed', async () => (await job(cy.id!)).state === 'completed');
  const cyDone = await job(cy.id!);
  check((cyDone.result as { activated: boolean }).activated === false, 'cy did not time out');
  console.log(`cy: completed, no signal within 500 ms, so a reminder (attempt ${cyDone.attempt})`);

  const once = (mail: string) => mails.filter((m) => m === mail).length === 1;
  check(
    ['ada', 'bo', 'cy'].every((u) => once(`${u}: Welcome aboard`)) &&
      once('bo: Tips for the pro plan') &&
      once('cy: Need a hand getting started?') &&
      mails.length === 5,
    `mails sent: ${mails.join('; ')}`,
  );
  const stillAsleep = await job(ada.id!);
  check(stillAsleep.state === 'queued' && stillAsleep.attempt === 0, 'ada woke up early');
  console.log(
    `each mail sent once (${mails.length} mails); ada is still asleep until ${stillAsleep.runAt.toISOString()}`,
  );

  console.log('\nThe report in steps: collect, build (fails once), store (transactional), notify');
  const report = await enqueue(db, monthlyReport, { month: '2026-10' });
  await runUntil('report completed', async () => (await job(report.id!)).state === 'completed');
  const done = await job(report.id!);
  const result = done.result as { reportId: number; file: string };
  const [rows] = await db.db
    .select({ n: count() })
    .from(reports)
    .where(and(eq(reports.jobId, report.id!), eq(reports.id, result.reportId)));
  console.log(`report: completed, report #${result.reportId} in ${result.file} (attempt ${done.attempt})`);
  const notified = mails.filter((m) => m.startsWith('finance@example.com')).length;
  console.log(`calls: collect ${ran.collect}, build ${ran.build}, notify ${notified}; rows stored: ${rows?.n}`);
  const steps = (done.steps ?? []).map(
    (s) => `${s.name} ${s.state} (${s.attempts} attempt${s.attempts === 1 ? '' : 's'})`,
  );
  console.log(`its steps: ${steps.join(', ')}`);
  check(done.attempt === 1, 'the step retry used an attempt of the job');
  check(ran.collect === 1 && ran.build === 2 && notified === 1 && rows?.n === 1, 'a step ran too often');

  console.log('\nAn approval link: a callback token, POSTed to the signal route by whoever holds it');
  // A secret for this run (deployed: SKIPLOCK_SIGNAL_SECRET, 32+ characters, from your secret store).
  process.env.SKIPLOCK_SIGNAL_SECRET ??= randomBytes(32).toString('hex');
  const order = await enqueue(db, approval, { orderId: 'A-17' });
  await runUntil('waiting for approval', async () => (await job(order.id!)).steps?.at(-1)?.state === 'waiting');
  const link = mails.at(-1)?.split(': ').at(-1) ?? '';
  // The route as Vercel runs it (api/signal.ts), called the way the manager's click would be.
  const route = createVercelSignal({ env: { ...process.env, DATABASE_URL: database.url, SKIPLOCK_LOG_LEVEL: 'warn' } });
  const click = () =>
    route(
      new Request(link, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"approved":true}' }),
    );
  const first = await click();
  const again = await click();
  console.log(`POST ${link.slice(0, 48)}… → ${first.status} ${JSON.stringify(await first.json())}`);
  console.log(
    `the same link again → ${again.status} ${((await again.json()) as { error: { code: string } }).error.code}`,
  );
  check(first.status === 200 && again.status === 409, 'the token was not single-use');
  await runUntil('approval completed', async () => (await job(order.id!)).state === 'completed');
  const decided = (await job(order.id!)).result as { approved: boolean };
  check(decided.approved, 'the order was not approved');
  console.log(`approval: completed, order A-17 approved (attempt ${(await job(order.id!)).attempt})`);
} finally {
  await resetSharedRuntime();
  await db.close();
  await database.stop();
}
