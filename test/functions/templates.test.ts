// The deployable app of this repository — functions/ (Lambda) and api/ (Vercel), the same files
// `skiplock init` writes — configured only through its environment, as it is once deployed.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { httpApiEvent, lambdaContext, scheduledEvent } from '../../testing/events.js';
import {
  configureNeonForLocalPostgres,
  databaseUrl,
  type TestContext,
  testDriver,
  useTestSchema,
} from '../helpers/db.js';

let t: TestContext;
useTestSchema('functions-templates', (ctx) => {
  t = ctx;
});

const CRON_SECRET = 'cron-secret-0123456789abcdef00';
const saved = { ...process.env };
beforeAll(() => configureNeonForLocalPostgres());
afterEach(async () => {
  await resetSharedRuntime();
  process.env = { ...saved };
});
afterAll(() => {
  process.env = saved;
});

/** The deployed environment: the variables serverless.yml / the Vercel project would set. */
function deploy(extra: Record<string, string | undefined>) {
  process.env = {
    ...saved,
    DATABASE_URL: databaseUrl(),
    SKIPLOCK_DRIVER: testDriver(),
    SKIPLOCK_SCHEMA: t.schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    CRON_SECRET,
    EMAIL_API_URL: undefined,
    ...extra,
  };
}

const email = (key: string) => ({ to: 'ada@example.com', subject: 'Hi', template: 'welcome', idempotencyKey: key });

async function enqueueEmails(): Promise<{ images: string; emails: string }> {
  const { jobs } = await import('../../functions/jobs.js');
  const sendEmail = jobs[0];
  const q = createEnqueuer({ schema: t.schema });
  const images = await q.enqueue(t.db, sendEmail, email('a'), { queue: 'images' });
  const emails = await q.enqueue(t.db, sendEmail, email('b'));
  return { images: images.id, emails: emails.id };
}

async function stateOf(id: string): Promise<string> {
  const { rows } = await t.admin.query(`select state from "${t.schema}".jobs where id = $1`, [id]);
  return rows[0].state;
}

const cron = (path: string) =>
  new Request(`https://app.example.com${path}`, { headers: { authorization: `Bearer ${CRON_SECRET}` } });

describe(`the deployed workers read SKIPLOCK_QUEUES (${testDriver()})`, () => {
  it('Vercel api/worker.ts: a job on a queue the route does not name runs once the variable names it', async () => {
    const ids = await enqueueEmails();
    const { GET } = await import('../../api/worker.js');
    deploy({ SKIPLOCK_QUEUES: 'emails' });
    expect(await (await GET(cron('/api/worker'))).json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await stateOf(ids.images)).toBe('queued');
    await resetSharedRuntime();
    deploy({ SKIPLOCK_QUEUES: 'images,emails' });
    expect(await (await GET(cron('/api/worker'))).json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await stateOf(ids.images)).toBe('completed');
  });

  it('Lambda functions/worker.ts: the same, with the queues serverless.yml sets per function', async () => {
    const ids = await enqueueEmails();
    const { handler } = await import('../../functions/worker.js');
    deploy({ SKIPLOCK_QUEUES: 'emails,webhooks' });
    expect(await handler(scheduledEvent(), lambdaContext(60_000))).toMatchObject({ claimed: 1, completed: 1 });
    expect(await stateOf(ids.images)).toBe('queued');
    await resetSharedRuntime();
    deploy({ SKIPLOCK_QUEUES: 'images,emails' });
    expect(await handler(scheduledEvent(), lambdaContext(60_000))).toMatchObject({ claimed: 1, completed: 1 });
    expect(await stateOf(ids.images)).toBe('completed');
  });

  it('queues named in code win over the variable (api/reports-worker.ts runs only reports)', async () => {
    const ids = await enqueueEmails();
    const { GET } = await import('../../api/reports-worker.js');
    deploy({ SKIPLOCK_QUEUES: 'images,emails' });
    expect(await (await GET(cron('/api/reports-worker'))).json()).toMatchObject({ claimed: 0 });
    expect([await stateOf(ids.images), await stateOf(ids.emails)]).toEqual(['queued', 'queued']);
  });
});

describe(`one bad setting disables only what needs it (${testDriver()})`, () => {
  it('a 1-character SKIPLOCK_ENQUEUE_TOKEN disables HTTP enqueue only: the crons and direct invoke still work', async () => {
    deploy({ SKIPLOCK_ENQUEUE_TOKEN: 'x' });
    const worker = await import('../../api/worker.js');
    const maintenance = await import('../../api/maintenance.js');
    const vercelEnqueue = await import('../../api/enqueue.js');
    const lambdaEnqueue = await import('../../functions/enqueue.js');

    const body = JSON.stringify({ kind: 'send-email', payload: email('c') });
    const refused = await vercelEnqueue.POST(
      new Request('https://app.example.com/api/enqueue', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer x' },
        body,
      }),
    );
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      error: { message: 'this endpoint is disabled: SKIPLOCK_ENQUEUE_TOKEN must be at least 16 characters' },
    });
    const overHttp = (await lambdaEnqueue.handler(httpApiEvent({ headers: { authorization: 'Bearer x' }, body }))) as {
      statusCode: number;
    };
    expect(overHttp.statusCode).toBe(401);

    // Direct invoke is authorized by IAM, not the token: it enqueues; the worker cron runs the job.
    expect(await lambdaEnqueue.handler({ kind: 'send-email', payload: email('d') })).toMatchObject({ status: 200 });
    const run = await worker.GET(cron('/api/worker'));
    expect(run.status).toBe(200);
    expect(await run.json()).toMatchObject({ claimed: 1, completed: 1 });
    const tick = await maintenance.GET(cron('/api/maintenance'));
    expect(tick.status).toBe(200);
  });
});
