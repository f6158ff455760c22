import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { stats } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { type Logger, silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// A worker whose invocations are shorter than a kind's timeout never runs that kind. It must be
// impossible to miss: refused where the worker is made when its time is known, else the summary's
// own stoppedBecause, the warning, and a flag in the stats (and a hold in explain: test/db).
let t: TestContext;
useTestSchema('core-unfit-kinds', (ctx) => {
  t = ctx;
});

const payload = z.object({ n: z.number() });
const slow = defineJob({ kind: 'slow-report', payload, timeoutMs: 30_000, handler: () => {} });
const quick = defineJob({ kind: 'quick', payload, timeoutMs: 1_000, handler: () => {} });
const byKind = async () => Object.fromEntries((await stats(t.db, { schema: t.schema })).map((r) => [r.kind, r]));

describe('kinds that never fit the invocation', () => {
  it('are named in one kinds_never_fit warning per warm instance; the kinds that fit still run', async () => {
    const lines: { message: string; fields: Record<string, unknown> | undefined }[] = [];
    const logger: Logger = {
      debug() {},
      info() {},
      warn: (message, fields) => void lines.push({ message, fields }),
      error() {},
    };
    await enqueuerFor(t.schema).enqueueMany(t.db, [slow.with({ n: 1 }), quick.with({ n: 2 })]);
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [slow, quick], logger, clock: new ManualClock() });
    const unfit = { budgetMs: 9_000, kinds: [{ kind: 'slow-report', timeoutMs: 30_000 }] };
    // Some kind fits: the invocation drains what it can, and its summary names the kind that never fits.
    expect(await worker.runInvocation({ remainingMs: 10_000 })).toMatchObject({
      completed: 1,
      stoppedBecause: 'drained',
      unfit,
    });
    expect(await worker.runInvocation({ remainingMs: 10_000 })).toMatchObject({ completed: 0, unfit });
    const warned = lines.filter((l) => l.message === 'kinds_never_fit');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.fields).toMatchObject(unfit);
  });

  it("a kind of the worker's slowQueues that never fits is left to another worker: not refused, not logged", async () => {
    const report = defineJob({ kind: 'long-report', queue: 'reports', payload, timeoutMs: 30_000, handler: () => {} });
    const warned: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (message) => void warned.push(message) };
    const made =
      (slowQueues?: string[], jobs = [report, quick]) =>
      () =>
        createWorker({ db: t.db, schema: t.schema, jobs, logger, invocationMs: 20_000, slowQueues });
    // Without slowQueues the 30 s kind never fits a 20 s invocation: refused as the worker is made.
    expect(made()).toThrow(/long-report \(timeoutMs 30000\) never fits/);
    // slowQueues covers only its own queues: the same kind in the default queue is still refused.
    expect(made(['reports'], [slow, quick])).toThrow(/slow-report \(timeoutMs 30000\) never fits/);
    expect(made(['bad queue'])).toThrow(/queue/);
    const [reportJob, quickJob] = await enqueuerFor(t.schema).enqueueMany(t.db, [
      report.with({ n: 1 }),
      quick.with({ n: 2 }),
    ]);
    const worker = made(['reports'])();
    const summary = await worker.runInvocation({ remainingMs: 20_000 });
    expect(summary).toMatchObject({
      completed: 1,
      stoppedBecause: 'drained',
      unfit: { kinds: [{ kind: 'long-report', timeoutMs: 30_000 }] },
    });
    expect(warned).not.toContain('kinds_never_fit');
    const rows = await t.admin.query(`select id, state from "${t.schema}".jobs where id = any($1) order by id`, [
      [reportJob?.id, quickJob?.id],
    ]);
    expect(rows.rows).toEqual([
      { id: reportJob?.id, state: 'queued' },
      { id: quickJob?.id, state: 'completed' },
    ]);
  });

  it('an invocation none of whose kinds fits stops with no_kind_fits, naming the kinds and its budget', async () => {
    const [job] = await enqueuerFor(t.schema).enqueueMany(t.db, [slow.with({ n: 1 })]);
    const errors: { message: string; fields: Record<string, unknown> | undefined }[] = [];
    const logger: Logger = { ...silentLogger, error: (message, fields) => void errors.push({ message, fields }) };
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [slow], logger, clock: new ManualClock() });
    // The case: the default timeoutMs-sized kind, an invocation of 15 s.
    const summary = await worker.runInvocation({ remainingMs: 15_000 });
    expect(summary).toMatchObject({
      claimed: 0,
      stoppedBecause: 'no_kind_fits',
      unfit: { budgetMs: 14_000, kinds: [{ kind: 'slow-report', timeoutMs: 30_000 }] },
    });
    // Nothing this worker does can run: an error, not a warning.
    expect(errors.map((e) => e.message)).toEqual(['kinds_never_fit']);
    expect(errors[0]?.fields?.hint).toMatch(/raise the function timeout or lower the kind's timeoutMs/);
    // The job is untouched: no attempt counted.
    const row = await t.admin.query(`select state, attempt from "${t.schema}".jobs where id = $1`, [job?.id]);
    expect(row.rows).toEqual([{ state: 'queued', attempt: 0 }]);
  });

  it('createWorker refuses a kind whose timeoutMs and safetyMarginMs exceed invocationMs', async () => {
    const make = (options: Partial<Parameters<typeof createWorker>[0]>) =>
      createWorker({ db: t.db, schema: t.schema, jobs: [slow, quick], logger: silentLogger, ...options });
    expect(() => make({ invocationMs: 20_000 })).toThrow(ConfigError);
    expect(() => make({ invocationMs: 20_000 })).toThrow(
      "job kind slow-report (timeoutMs 30000) never fits this worker's invocations: 20000 ms less safetyMarginMs 1000 and 500 ms to start leaves 18500 ms; raise the function's timeout or lower the kind's timeoutMs",
    );
    // It fits exactly: timeoutMs + safetyMarginMs + 500 ms to start = invocationMs. A kind that fitted
    // only to the millisecond was never claimed in practice, and nothing said why.
    expect(() => make({ invocationMs: 31_500 })).not.toThrow();
    expect(() => make({ invocationMs: 31_499 })).toThrow(ConfigError);
    expect(() => make({ invocationMs: 31_000 })).toThrow(ConfigError);
    expect(() => make({ invocationMs: 31_000, safetyMarginMs: 500 })).not.toThrow();
    // A kind on a queue this worker does not serve is another worker's concern.
    const elsewhere = defineJob({ kind: 'nightly', queue: 'reports', payload, timeoutMs: 120_000, handler: () => {} });
    expect(() => make({ jobs: [elsewhere, quick], queues: ['default'], invocationMs: 20_000 })).not.toThrow();
    expect(() => make({ jobs: [elsewhere, quick], invocationMs: 20_000 })).toThrow(/job kind nightly/);
    expect(() => make({ invocationMs: 0 })).toThrow('invocationMs must be a whole number of ms from 1 to 86400000');
  });

  it('the worker records its budget and the kinds that never fit; stats flag a kind no serving worker fits', async () => {
    const q = enqueuerFor(t.schema);
    await q.enqueueMany(t.db, [slow.with({ n: 1 }), quick.with({ n: 2 })]);
    // No worker recorded itself yet: nothing to judge by.
    expect((await byKind())['slow-report']).toMatchObject({ ready: 1, unserved: false, unfit: null });
    const short = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [slow, quick],
      name: 'short',
      logger: silentLogger,
      clock: new ManualClock(),
    });
    expect(await short.runInvocation({ remainingMs: 15_000 })).toMatchObject({ completed: 1 });
    const seen = await t.admin.query(`select name, kinds, budget_ms, unfit_kinds from "${t.schema}".workers`);
    expect(seen.rows).toEqual([
      { name: 'short', kinds: ['quick', 'slow-report'], budget_ms: 14_000, unfit_kinds: ['slow-report'] },
    ]);
    await q.enqueueMany(t.db, [quick.with({ n: 3 })]);
    const rows = await byKind();
    // Served (so not `unserved`), but by no worker whose invocations fit it.
    expect(rows['slow-report']).toMatchObject({ ready: 1, unserved: false, unfit: { budgetMs: 14_000 } });
    expect(rows.quick).toMatchObject({ ready: 1, unfit: null });
    // A worker with longer invocations serves it too: it runs there, and the flag goes.
    const long = createWorker({ db: t.db, schema: t.schema, jobs: [slow], name: 'long', logger: silentLogger });
    expect(await long.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 1 });
    await q.enqueueMany(t.db, [slow.with({ n: 4 })]);
    expect((await byKind())['slow-report']).toMatchObject({ ready: 1, unfit: null });
  });

  it('a kind that fits the budget only to the millisecond is reported as never fitting, not skipped in silence', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [slow.with({ n: 1 })]);
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [slow, quick], logger: silentLogger });
    // 30 s + the 1 s margin + 1 ms: the claim, a few ms after the start, no longer fits it.
    const summary = await worker.runInvocation({ remainingMs: 31_001 });
    expect(summary.claimed).toBe(0);
    expect(summary.unfit?.kinds).toEqual([{ kind: 'slow-report', timeoutMs: 30_000 }]);
  });

  it("a worker of one queue stops with no_kind_fits when none of that queue's kinds fits, whatever other kinds it knows", async () => {
    const nightly = defineJob({ kind: 'nightly', queue: 'reports', payload, timeoutMs: 60_000, handler: () => {} });
    await enqueuerFor(t.schema).enqueueMany(t.db, [nightly.with({ n: 1 })]);
    const errors: string[] = [];
    const logger: Logger = { debug() {}, info() {}, warn() {}, error: (message) => void errors.push(message) };
    // The shared list of kinds, as the deployed functions pass it, and a worker for one queue.
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [nightly, quick], queues: ['reports'], logger });
    const summary = await worker.runInvocation({ remainingMs: 30_000 });
    expect(summary).toMatchObject({ claimed: 0, stoppedBecause: 'no_kind_fits' });
    expect(summary.unfit?.kinds).toEqual([{ kind: 'nightly', timeoutMs: 60_000 }]);
    expect(errors).toEqual(['kinds_never_fit']);
  });
});
