/**
 * `npm run example:batches`: a handler that takes a batch. Seven e-mails go to a (simulated) bulk mail
 * API in calls of up to five; the API answers per message — accepted, rate limited, bounced — and each
 * job gets its own outcome: completed with the message id, retried after the API's delay, or dead.
 * Uses DATABASE_URL, or an embedded Postgres.
 */
import { connect, createWorker, defineBatchJob, enqueueMany, listJobs, migrate, silentLogger } from 'skiplock';
import { z } from 'zod';
import { resolveDevDatabase } from '../scripts/local-postgres.js';

type Delivery =
  | { status: 'accepted'; messageId: string }
  | { status: 'throttled'; retryAfterMs: number }
  | { status: 'bounced'; why: string };

/** A stand-in for a bulk mail API (one request for many messages, an answer per message). */
const mailApi = {
  calls: [] as number[],
  async sendBulk(messages: { to: string; subject: string }[]): Promise<Delivery[]> {
    mailApi.calls.push(messages.length);
    return messages.map(({ to }, i): Delivery => {
      if (to.startsWith('busy')) return { status: 'throttled', retryAfterMs: 60_000 };
      if (to.endsWith('.invalid')) return { status: 'bounced', why: 'no such domain' };
      return { status: 'accepted', messageId: `msg-${mailApi.calls.length}-${i}` };
    });
  },
};

// #region batch-kind
const sendEmail = defineBatchJob({
  kind: 'send-email',
  payload: z.object({ to: z.email(), subject: z.string() }),
  batch: { size: 5, maxWaitMs: 200 }, // up to 5 per call; wait up to 200 ms to fill a short batch
  timeoutMs: 20_000, // covers the whole call
  handler: async (jobs, ctx) => {
    ctx.logger.info('sending', { count: jobs.length });
    const answers = await mailApi.sendBulk(jobs.map((job) => job.payload));
    // One outcome per job, in any order; a job left out is retried (batch_outcome_missing).
    return jobs.map((job, i) => {
      const answer = answers[i] as Delivery;
      if (answer.status === 'accepted') return job.done({ messageId: answer.messageId });
      if (answer.status === 'throttled') return job.retryAfter(answer.retryAfterMs, 'throttled by the mail API');
      return job.dead(new Error(answer.why), 'bounced'); // to the DLQ, reason 'bounced'
    });
  },
});
// #endregion batch-kind

const database = await resolveDevDatabase();
const db = connect({ connectionString: database.url });
try {
  await migrate(db);
  const recipients = ['ada', 'bo', 'busy-cy', 'dee', 'eve@nowhere.invalid', 'fay', 'gus'];
  await enqueueMany(
    db,
    recipients.map((name) =>
      sendEmail.with({ to: name.includes('@') ? name : `${name}@example.com`, subject: 'Hello' }),
    ),
  );
  const summary = await createWorker({ db, jobs: [sendEmail], logger: silentLogger }).runInvocation({
    remainingMs: 30_000,
  });
  console.log(`calls to the mail API: ${mailApi.calls.join(' + ')} messages`);
  console.log(
    `summary: claimed ${summary.claimed}, completed ${summary.completed}, retried ${summary.retried}, dead ${summary.dead}`,
  );
  const jobs = await listJobs(db, { kind: 'send-email', limit: 10 });
  for (const job of jobs.sort((a, b) => Number(a.id) - Number(b.id))) {
    const to = (job.payload as { to: string }).to;
    const detail =
      job.state === 'completed'
        ? JSON.stringify(job.result)
        : job.state === 'dead'
          ? `${job.deadReason}: ${job.lastError?.message}`
          : `retried: ${job.lastError?.message}`;
    console.log(`${to}: ${job.state} (${detail})`);
  }
} finally {
  await db.close();
  await database.stop();
}
