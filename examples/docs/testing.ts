// An application's own test (vitest here) with skiplock/testing: enqueue, run the worker, assert.

// #region run-jobs
import { connect, createEnqueuer, migrate, silentLogger } from 'skiplock';
import { runJobs } from 'skiplock/testing';
import { expect, it } from 'vitest';
import { sendEmail } from './jobs.js';

const schema = 'test_emails'; // a schema per test file lets files run in parallel
const { enqueue } = createEnqueuer({ schema });

it('sends the welcome e-mail once', async () => {
  const db = connect({ connectionString: process.env.TEST_DATABASE_URL! });
  await migrate(db, { schema });
  const sent: string[] = [];
  await enqueue(db, sendEmail, { to: 'ada@example.com', subject: 'Welcome' });
  const result = await runJobs({
    db,
    schema,
    jobs: [sendEmail],
    // replaces the kind's own handler: no real e-mail in a test
    handlers: { 'send-email': async (email: { to: string }) => void sent.push(email.to) },
    logger: silentLogger,
  });
  expect(result).toMatchObject({ completed: 1, dead: 0 });
  expect(sent).toEqual(['ada@example.com']);
  await db.close();
});
// #endregion run-jobs
