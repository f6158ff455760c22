// Testing the Lambda entries themselves with the events and contexts of skiplock/testing.

// #region lambda-events
import { connect, migrate } from 'skiplock';
import { createLambdaEnqueue, createLambdaWorker } from 'skiplock/lambda';
import { httpApiEvent, lambdaContext, scheduledEvent } from 'skiplock/testing';
import { beforeAll, expect, it } from 'vitest';
import { jobs } from './jobs.js';

const env = {
  DATABASE_URL: process.env.TEST_DATABASE_URL,
  SKIPLOCK_SCHEMA: 'test_lambda',
  SKIPLOCK_ENQUEUE_TOKEN: 'test-token-0123456789',
};

beforeAll(async () => {
  const db = connect({ connectionString: env.DATABASE_URL! });
  await migrate(db, { schema: env.SKIPLOCK_SCHEMA });
  await db.close();
});

it('enqueues over HTTP and runs the job on the next tick', async () => {
  const enqueue = createLambdaEnqueue(jobs, { env });
  const response = await enqueue(
    httpApiEvent({
      headers: { authorization: `Bearer ${env.SKIPLOCK_ENQUEUE_TOKEN}` },
      body: JSON.stringify({ kind: 'send-email', payload: { to: 'ada@example.com', subject: 'Hi' } }),
    }),
  );
  expect(response).toMatchObject({ statusCode: 200 });

  const worker = createLambdaWorker(jobs, { env });
  const summary = await worker(scheduledEvent(), lambdaContext(30_000)); // 30 s of remaining time
  expect(summary).toMatchObject({ completed: 1 });
});
// #endregion lambda-events
