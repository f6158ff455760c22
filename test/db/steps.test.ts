import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { claimJobs } from '../../db/statements/claim.js';
import { readSteps, readStepsStatement, recordStep, suspendJob } from '../../db/statements/steps.js';
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
    const lease = async () =>
      (await t.admin.query(`select lease_expires_at from "${t.schema}".jobs where id = $1`, [job.id])).rows[0];
    const before = await lease();
    const step = { name: 'a', position: 0, type: 'run' as const, state: 'completed' as const, attempts: 1 };
    expect(await readSteps(t.db.executor, t.schema, job, 600_000)).toBeNull();
    expect(await lease()).toEqual(before); // no extension for a stale holder
    expect(await recordStep(t.db.executor, t.schema, job, step)).toBe(false);
    expect(await suspendJob(t.db.executor, t.schema, job, { delayMs: 0, step })).toBeNull();
    expect((await t.admin.query(`select count(*)::int as n from "${t.schema}".job_steps`)).rows[0].n).toBe(0);
  });

  it("a job's first step waits for one flushed commit: the read of its steps and lease extension commits unflushed", async () => {
    const job = await claimOne();
    // Run in a batch (one transaction) with a look at the setting its COMMIT reads.
    const [read, setting] = await t.db.executor.batch([
      readStepsStatement(t.schema, job, 600_000),
      sql`select current_setting('synchronous_commit') as commit`,
    ]);
    expect(read).toHaveLength(1); // held, no steps yet
    expect(setting).toEqual([{ commit: 'off' }]);
    const lease = await t.admin.query(
      `select lease_expires_at > now() + interval '500 seconds' as extended from "${t.schema}".jobs where id = $1`,
      [job.id],
    );
    expect(lease.rows[0].extended).toBe(true);
  });

  it('a rescuer reads the steps its stale predecessor recorded and extends its own lease; the predecessor then reads and writes nothing', async () => {
    const first = await claimOne();
    const a = { name: 'a', position: 0, type: 'run' as const, state: 'completed' as const, attempts: 1 };
    expect(await readSteps(t.db.executor, t.schema, first, 60_000)).toEqual([]);
    expect(await recordStep(t.db.executor, t.schema, first, { ...a, resultJson: '"A"' })).toBe(true);
    // Its lease runs out (an extension lost with a crash of the database leaves the claim's) and another claims it.
    await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [
      first.id,
    ]);
    const { jobs } = await claimJobs(t.db.executor, t.schema, {
      leases: [{ kind: 'stepped', leaseMs: 60_000 }],
      limit: 1,
      invocationId: 'rescuer',
    });
    const second = jobs[0] as NonNullable<(typeof jobs)[number]>;
    expect(second).toMatchObject({ id: first.id, attempt: 2 });
    expect(await readSteps(t.db.executor, t.schema, second, 600_000)).toMatchObject([
      { name: 'a', state: 'completed', resultJson: '"A"' },
    ]);
    expect(await readSteps(t.db.executor, t.schema, first, 600_000)).toBeNull();
    const b = { name: 'b', position: 1, type: 'run' as const, state: 'completed' as const, attempts: 1 };
    expect(await recordStep(t.db.executor, t.schema, first, b)).toBe(false);
    expect(await recordStep(t.db.executor, t.schema, second, b)).toBe(true);
    const rows = await t.admin.query(`select name from "${t.schema}".job_steps where job_id = $1 order by position`, [
      first.id,
    ]);
    expect(rows.rows).toEqual([{ name: 'a' }, { name: 'b' }]);
  });
});
