// An application's own test of a week-long flow of durable steps: runJobs at a TestTime, moved on by
// days. test/e2e/testing-subpath.test.ts runs this file as it is.

// #region test-time
import { connect, createEnqueuer, defineJob, getJob, migrate, silentLogger } from 'skiplock';
import { runJobs, TestTime } from 'skiplock/testing';
import { expect, it } from 'vitest';
import { z } from 'zod';

const DAY = 86_400_000;
const sent: string[] = [];

// The kind as deployed, with its real durations: a week asleep, then two days to reply.
const onboarding = defineJob({
  kind: 'onboarding',
  payload: z.object({ user: z.string() }),
  handler: async ({ user }, ctx) => {
    await ctx.step('welcome', () => void sent.push(`welcome ${user}`));
    await ctx.sleep('a-week', 7 * DAY);
    await ctx.step('check-in', () => void sent.push(`check-in ${user}`));
    const reply = await ctx.waitForSignal('replied', { key: `replied:${user}`, timeoutMs: 2 * DAY });
    if (reply.timedOut) await ctx.step('reminder', () => void sent.push(`reminder ${user}`));
  },
});

const schema = `test_onboarding_${process.pid}`; // a schema per test process
const { enqueue } = createEnqueuer({ schema });

it('checks in after a week, and reminds two days later when no reply came', async () => {
  const db = connect({ connectionString: process.env.TEST_DATABASE_URL! });
  await migrate(db, { schema });
  // The time runJobs runs at: never behind the database's clock, moved on only by the test.
  const time = new TestTime();
  const run = () => runJobs({ db, schema, jobs: [onboarding], logger: silentLogger, time });
  const { id } = await enqueue(db, onboarding, { user: 'ada' });

  await run();
  expect(sent).toEqual(['welcome ada']);
  time.advance({ days: 6, hours: 23 });
  await run(); // the week is not over: nothing runs
  expect(sent).toEqual(['welcome ada']);
  time.advance({ hours: 1 });
  await run(); // a week later: the check-in, then the wait for a reply
  expect(sent).toEqual(['welcome ada', 'check-in ada']);
  const job = await getJob(db, id, { schema, now: time.now() });
  expect(job?.steps?.at(-1)).toMatchObject({ name: 'replied', state: 'waiting' });
  time.advance({ days: 2 });
  await run(); // no reply within two days: the reminder
  expect(sent).toEqual(['welcome ada', 'check-in ada', 'reminder ada']);
  await db.close();
});
// #endregion test-time
