import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RetryError } from '../../base/errors.js';
import { getJob } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { claimJobs } from '../../db/statements/claim.js';
import { reportProgress, settleOutcomes } from '../../db/statements/settle.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-results', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});
const { at } = useSuppliedClock();

const run = (jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, ...options }).runInvocation({
    remainingMs: 60_000,
  });
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;

describe(`results and progress (${testDriver()})`, () => {
  it("a handler's return value is stored with its completion and read back by getJob; undefined stores nothing", async () => {
    const send = defineJob({
      kind: 'send',
      payload: z.object({ to: z.string() }),
      handler: async (p) => ({ messageId: `m-${p.to}`, accepted: [p.to], at: 'ünïcødé' }),
    });
    const quiet = defineJob({ kind: 'quiet', payload: z.object({}), handler: () => undefined });
    const transactional = defineJob({
      kind: 'tx',
      payload: z.object({}),
      transactional: true,
      handler: async (_p, ctx) => {
        await ctx.tx.execute('select 1');
        return 42;
      },
    });
    // neon-http has no interactive transactions: no transactional kind there.
    const tx = testDriver() !== 'neon-http';
    const [a] = await q.enqueueMany(t.db, [send.with({ to: 'ada' })]);
    const [b] = await q.enqueueMany(t.db, [quiet.with({})]);
    const [c] = tx ? await q.enqueueMany(t.db, [transactional.with({})]) : [];
    expect(await run(tx ? [send, quiet, transactional] : [send, quiet])).toMatchObject({ completed: tx ? 3 : 2 });
    expect((await job(a?.id as string)).result).toEqual({ messageId: 'm-ada', accepted: ['ada'], at: 'ünïcødé' });
    expect((await job(b?.id as string)).result).toBeNull();
    if (c) expect((await job(c.id)).result).toBe(42);
    const view = await t.admin.query(`select result from "${t.schema}".job_status where id = $1`, [a?.id]);
    expect(view.rows[0].result).toEqual({ messageId: 'm-ada', accepted: ['ada'], at: 'ünïcødé' });
  });

  it('a result larger than maxResultBytes, or not JSON, sends the job to the DLQ with a clear error', async () => {
    const big = defineJob({ kind: 'big', payload: z.object({}), handler: () => ({ blob: 'é'.repeat(600) }) });
    const odd = defineJob({ kind: 'odd', payload: z.object({}), handler: () => ({ n: 10n }) });
    const bigTx = defineJob({
      kind: 'big-tx',
      payload: z.object({}),
      transactional: true,
      handler: () => 'x'.repeat(2_000),
    });
    const tx = testDriver() !== 'neon-http';
    const kinds = tx ? [big, odd, bigTx] : [big, odd];
    const ids = (
      await q.enqueueMany(
        t.db,
        kinds.map((k) => k.with({})),
      )
    ).map((r) => r.id);
    expect(await run(kinds, { maxResultBytes: 1_000 })).toMatchObject({ dead: kinds.length });
    const [j1, j2, j3] = await Promise.all(ids.map((id) => job(id)));
    expect(j1).toMatchObject({ state: 'dead', deadReason: 'invalid_result', result: null });
    // 600 two-byte characters and the 11 of JSON around them: counted in bytes, not characters.
    expect(j1?.lastError).toMatchObject({
      class: 'result_too_large',
      message: "the handler's result is 1211 bytes of JSON, more than maxResultBytes (1000)",
    });
    expect(j2?.lastError).toMatchObject({ class: 'result_not_json' });
    expect(j2?.lastError?.message).toMatch(/not JSON: .*BigInt/);
    if (tx) expect(j3).toMatchObject({ state: 'dead', deadReason: 'invalid_result' });
    expect(() => createWorker({ db: t.db, schema: t.schema, jobs: [big], maxResultBytes: 0 })).toThrow(
      /maxResultBytes must be a whole number/,
    );
  });

  it('a retried attempt gets the progress the previous one reported (ctx.lastProgress), and reports on from there', async () => {
    const seen: unknown[] = [];
    const report = defineJob({
      kind: 'report',
      payload: z.object({ pages: z.number() }),
      backoff: () => 0,
      handler: async (p, ctx) => {
        seen.push(ctx.lastProgress);
        const from = (ctx.lastProgress as { page: number } | null)?.page ?? 0;
        for (let page = from + 1; page <= p.pages; page++) {
          if (ctx.attempt === 1 && page === 3) throw new RetryError('the source timed out');
          await ctx.reportProgress({ page });
        }
        return { pages: p.pages, resumedFrom: from, lastSeen: ctx.lastProgress };
      },
    });
    const [r] = await q.enqueueMany(t.db, [report.with({ pages: 5 })]);
    await run([report]);
    await run([report]);
    expect(seen).toEqual([null, { page: 2 }]);
    expect(await job(r?.id as string)).toMatchObject({
      state: 'completed',
      attempt: 2,
      progress: { page: 5 },
      result: { pages: 5, resumedFrom: 2, lastSeen: { page: 5 } },
    });
  });

  it('progress survives a lease that ran out: the rescue carries it; the stale holder cannot write a result', async () => {
    const [j] = await q.enqueueMany(t.db, [defineJob({ kind: 'slow', payload: z.object({}) }).with({})]);
    const leases = [{ kind: 'slow', leaseMs: 1_000 }];
    const first = await claimJobs(t.db.executor, t.schema, { leases, limit: 1, invocationId: 'a', now: at(0) });
    const [held] = first.jobs;
    expect(held?.progress).toBeUndefined();
    expect(await reportProgress(t.db.executor, t.schema, held as never, { row: 700 }, at(500))).toBe(true);
    // The lease ran out at 1 s: another invocation rescues the job, with its progress.
    const rescue = await claimJobs(t.db.executor, t.schema, { leases, limit: 1, invocationId: 'b', now: at(2_000) });
    const [again] = rescue.jobs;
    expect(again).toMatchObject({ id: j?.id, attempt: 2, progress: { row: 700 } });
    // The first holder finishes late: fenced out, its result goes nowhere.
    const stale = await settleOutcomes(t.db.executor, t.schema, [
      { id: held?.id as string, leaseToken: held?.leaseToken as string, outcome: 'completed', result: '"stale"' },
    ]);
    expect([...stale.lost]).toEqual([j?.id]);
    await settleOutcomes(t.db.executor, t.schema, [
      { id: again?.id as string, leaseToken: again?.leaseToken as string, outcome: 'completed', result: '"fresh"' },
    ]);
    expect(await job(j?.id as string)).toMatchObject({ state: 'completed', result: 'fresh', progress: { row: 700 } });
  });
});
