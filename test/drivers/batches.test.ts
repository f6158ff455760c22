import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type BatchJob, defineBatchJob } from '../../core/batches.js';
import { silentLogger } from '../../core/logger.js';
import { replay } from '../../core/replay.js';
import { createWorker } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';

// The batch handler smoke set, on every driver: a batch kind's outcomes are written per job through
// the driver under test, in the statements of a single-job batch (they do not grow with the jobs),
// and a dead job of a batch is replayed like any other.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('drivers_batches', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const item = z.object({ n: z.number().int() });

const bulk = defineBatchJob({
  kind: 'bulk',
  payload: item,
  batch: { size: 50 },
  timeoutMs: 2_000,
  maxAttempts: 5,
  backoff: { type: 'constant', delayMs: 60_000 },
  handler: async (jobs, ctx) => {
    expect(await ctx.extendLeases(10_000)).toHaveLength(jobs.length);
    return jobs.flatMap((j: BatchJob<{ n: number }>) => {
      const n = j.payload.n % 5;
      if (n === 0) return [j.done({ n: j.payload.n })];
      if (n === 1) return [j.retry(new Error('try again'))];
      if (n === 2) return [j.retryAfter(30_000, 'later')];
      if (n === 3) return [j.dead(new Error('bounced'), 'bounced')];
      return [j.cancel('unsubscribed')];
    });
  },
});

const rows = async () =>
  (
    await t.admin.query(
      `select (payload->>'n')::int as n, state, dead_reason, result, last_error->>'message' as message
       from "${t.schema}".jobs order by id`,
    )
  ).rows;

/** Enqueues `n` jobs, runs one invocation, and returns its summary and the statements it sent. */
async function runBatch(n: number) {
  await t.admin.query(`delete from "${t.schema}".jobs`);
  await q.enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => bulk.with({ n: i })),
  );
  const { result, texts } = await captureStatements(testDriver(), () =>
    createWorker({ db: t.db, schema: t.schema, jobs: [bulk], logger: silentLogger }).runInvocation({
      remainingMs: 60_000,
    }),
  );
  return { summary: result, statements: texts.length };
}

describe(`batch handlers (${testDriver()})`, () => {
  it('writes each job of a batch its own outcome, in statements that do not grow with the batch', async () => {
    const small = await runBatch(5);
    expect(small.summary).toMatchObject({ claimed: 5, completed: 1, retried: 2, dead: 1, cancelled: 1 });
    const large = await runBatch(50);
    expect(large.summary).toMatchObject({ claimed: 50, completed: 10, retried: 20, dead: 10, cancelled: 10 });
    expect(large.statements).toBe(small.statements);
    const r = await rows();
    for (const x of r) {
      const expected = [
        { state: 'completed', result: { n: x.n } },
        { state: 'queued', message: 'try again' },
        { state: 'queued', message: 'later' },
        { state: 'dead', dead_reason: 'bounced', message: 'bounced' },
        { state: 'cancelled', message: 'unsubscribed' },
      ][x.n % 5];
      expect(x).toMatchObject(expected as object);
    }
  });

  it("a batch job's dead outcome is replayed on its own: the others of its batch stay as they ended", async () => {
    await runBatch(5);
    const dead = (await t.admin.query(`select id::text as id from "${t.schema}".jobs where state = 'dead'`)).rows;
    expect(dead).toHaveLength(1);
    const id = dead[0].id as string;
    expect(await replay(t.db, { schema: t.schema, ids: [id] })).toMatchObject({ replayed: [{ id }], refused: [] });
    expect((await rows()).map((x) => x.state)).toEqual(['completed', 'queued', 'queued', 'queued', 'cancelled']);
  });
});
