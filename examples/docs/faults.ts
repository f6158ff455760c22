// An application's own test of what its enqueue does when the network fails: the local Neon
// stand-ins lose the answer of the next insert after it committed. test/e2e/testing-subpath.test.ts
// runs this file as it is.

// #region lost-answer
import { connect, createEnqueuer, defineJob, migrate, OutcomeUnknownError } from 'skiplock';
import { startLocalNeon } from 'skiplock/testing';
import { expect, it } from 'vitest';
import { z } from 'zod';

const welcome = defineJob({ kind: 'welcome', payload: z.object({ user: z.string() }) });
const schema = `test_faults_${process.pid}`;
const { enqueue } = createEnqueuer({ schema });

// The signup's enqueue, retried once when its outcome is unknown: a key that holds one job per
// user, whatever its state, makes the retry safe.
async function enqueueWelcome(db: Parameters<typeof enqueue>[0], user: string) {
  const options = { dedupe: { key: `welcome:${user}`, mode: 'window' as const, windowMs: 1_000 * 365 * 86_400_000 } };
  try {
    return await enqueue(db, welcome, { user }, options);
  } catch (err) {
    if (!(err instanceof OutcomeUnknownError)) throw err;
    return enqueue(db, welcome, { user }, options); // the first job if it committed, else a new one
  }
}

it('a signup whose enqueue answer was lost still enqueues one welcome', async () => {
  const local = await startLocalNeon();
  const db = connect({ connectionString: process.env.TEST_DATABASE_URL!, driver: 'neon-http', neon: local.neon });
  try {
    await migrate(db, { schema });
    // The endpoint runs the next insert, commits it, and drops the connection before answering.
    local.faults.http.inject({ mode: 'lose-answer', match: 'insert into' });
    const result = await enqueueWelcome(db, 'ada');
    expect(result.outcome).toBe('deduplicated'); // the retry found the job the lost answer made
    expect(local.faults.http.counts()['lose-answer']).toBe(1);
  } finally {
    await db.close();
    await local.close();
  }
});
// #endregion lost-answer
