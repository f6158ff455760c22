import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { claimJobs } from '../../db/statements/claim.js';
import { readSteps, recordStep, suspendJob } from '../../db/statements/steps.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// The step statements on every driver: fenced on the lease, and a completed step never turned back.
let t: TestContext;
useTestSchema('db-steps', (ctx) => {
  t = ctx;
});

const kind = defineJob({ kind: 'stepped', payload: z.object({}) });
const claimOne = async () => {
  await enqueuerFor(t.schema).enqueueMany(t.db, [kind.with({})]);
  const { jobs } = await claimJobs(t.db.executor, t.schema, {
    leases: [{ kind: 'stepped', leaseMs: 60_000 }],
    limit: 1,
    invocationId: 'i',
  });
  return jobs[0] as NonNullable<(typeof jobs)[number]>;
};

describe(`step statements (${testDriver()})`, () => {
  it('a completed step stays completed when a failure of it is written afterwards (a commit whose answer was lost)', async () => {
    const job = await claimOne();
    const completed = {
      name: 'charge',
      position: 0,
      type: 'run' as const,
      state: 'completed' as const,
      attempts: 1,
      resultJson: '"ch_1"',
    };
    expect(await recordStep(t.db.executor, t.schema, job, completed)).toBe(true);
    const failure = { class: 'Error', message: 'connection reset' };
    // The runner saw the commit fail and reports the step failed, releasing the job for a retry.
    const runAt = await suspendJob(t.db.executor, t.schema, job, {
      delayMs: 0,
      error: failure,
      step: { name: 'charge', position: 0, type: 'run', state: 'failed', attempts: 1, error: failure },
    });
    expect(runAt).toBeInstanceOf(Date);
    expect(await readSteps(t.db.executor, t.schema, job, 1_000)).toBeNull(); // released: no longer held
    const rows = await t.admin.query(`select state, result, attempts from "${t.schema}".job_steps where job_id = $1`, [
      job.id,
    ]);
    expect(rows.rows).toEqual([{ state: 'completed', result: 'ch_1', attempts: 1 }]);
  });

  it('writes nothing for a holder whose lease was lost', async () => {
    const job = await claimOne();
    await t.admin.query(`update "${t.schema}".jobs set lease_token = gen_random_uuid() where id = $1`, [job.id]);
    const step = { name: 'a', position: 0, type: 'run' as const, state: 'completed' as const, attempts: 1 };
    expect(await recordStep(t.db.executor, t.schema, job, step)).toBe(false);
    expect(await suspendJob(t.db.executor, t.schema, job, { delayMs: 0, step })).toBeNull();
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".job_steps`)).rows[0].n).toBe(0);
  });
});
