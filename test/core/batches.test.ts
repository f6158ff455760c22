import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidOptionsError, RetryError } from '../../base/errors.js';
import { type BatchHandler, type BatchJob, defineBatchJob } from '../../core/batches.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('batches', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const item = z.object({ n: z.number().int() });
type Item = z.infer<typeof item>;

function batchKind(
  handler: BatchHandler<Item>,
  extra: { size?: number; maxWaitMs?: number; timeoutMs?: number; maxAttempts?: number; kind?: string } = {},
) {
  return defineBatchJob({
    kind: extra.kind ?? 'bulk',
    payload: item,
    batch: { size: extra.size ?? 10, ...(extra.maxWaitMs === undefined ? {} : { maxWaitMs: extra.maxWaitMs }) },
    timeoutMs: extra.timeoutMs ?? 2_000,
    maxAttempts: extra.maxAttempts ?? 5,
    backoff: { type: 'constant', delayMs: 60_000 },
    handler,
  });
}

function worker(definition: ReturnType<typeof batchKind>, options: Partial<WorkerOptions> = {}) {
  return createWorker({
    db: t.db,
    schema: t.schema,
    jobs: [definition],
    logger: silentLogger,
    leaseGraceMs: 1_000,
    safetyMarginMs: 500,
    ...options,
  });
}

const enqueueItems = async (definition: ReturnType<typeof batchKind>, n: number, from = 0) =>
  (
    await q.enqueueMany(
      t.db,
      Array.from({ length: n }, (_, i) => definition.with({ n: from + i })),
    )
  ).map((r) => r.id as string);

const rows = async () =>
  (
    await t.admin.query(
      `select case when payload->>'n' ~ '^[0-9]+$' then (payload->>'n')::int end as n, state, dead_reason, result, last_error, attempt, progress,
         extract(epoch from run_at - now())::int as due_in_s
       from "${t.schema}".jobs order by id`,
    )
  ).rows;

/** One turn of the event loop: every microtask queued so far has run. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Polls (turn by turn, no timers) until `ready` holds: what is awaited is a database answer, not time. */
async function until(ready: () => boolean | Promise<boolean>): Promise<void> {
  const giveUpAt = Date.now() + 10_000;
  while (Date.now() < giveUpAt) {
    if (await ready()) return;
    await nextTurn();
  }
  throw new Error('condition never held');
}

const START = 1_000_000;

/**
 * A ManualClock that counts the short timers waiting (a filling batch's poll, ≤ 250 ms), apart from
 * each statement's deadline timer: a test moves the clock only once the fill waits for its poll (a
 * statement in flight must not see its time run out while the database answers).
 */
class PollClock extends ManualClock {
  polls = 0;
  constructor() {
    super(START);
  }
  override setTimer(fn: () => void, ms: number): () => void {
    if (ms > 250) return super.setTimer(fn, ms);
    let waiting = true;
    const done = () => {
      if (waiting) this.polls--;
      waiting = false;
    };
    this.polls++;
    const cancel = super.setTimer(() => {
      done();
      fn();
    }, ms);
    return () => {
      done();
      cancel();
    };
  }
}

describe(`batch handlers (${testDriver()})`, () => {
  it('writes the outcome the handler gave each job: done with a result, retry, retry-after, dead, cancelled, left out', async () => {
    const calls: number[][] = [];
    const definition = batchKind((jobs) => {
      calls.push(jobs.map((j) => j.payload.n));
      const by = (n: number) => jobs.find((j) => j.payload.n === n) as BatchJob<Item>;
      return [
        by(0).done({ sent: 0 }),
        by(1).retry(new Error('provider said try again')),
        by(2).retryAfter(120_000, new Error('429 for this item')),
        by(3).dead(new Error('address bounced'), 'bounced'),
        by(4).cancel('user unsubscribed'),
        // 5 is left out
      ];
    });
    await enqueueItems(definition, 6);
    const summary = await worker(definition).runInvocation({ remainingMs: 30_000 });
    expect(calls).toEqual([[0, 1, 2, 3, 4, 5]]);
    expect(summary).toMatchObject({ claimed: 6, completed: 1, retried: 3, dead: 1, cancelled: 1 });
    const r = await rows();
    expect(r[0]).toMatchObject({ state: 'completed', result: { sent: 0 } });
    expect(r[1]).toMatchObject({ state: 'queued', last_error: { message: 'provider said try again' } });
    expect(r[1].due_in_s).toBeGreaterThan(50); // the kind's backoff: 60 s
    expect(r[1].due_in_s).toBeLessThan(70);
    expect(r[2]).toMatchObject({ state: 'queued', last_error: { class: 'retry_after', message: '429 for this item' } });
    expect(r[2].due_in_s).toBeGreaterThan(110); // its own delay: 120 s
    expect(r[3]).toMatchObject({ state: 'dead', dead_reason: 'bounced', last_error: { message: 'address bounced' } });
    expect(r[4]).toMatchObject({ state: 'cancelled', last_error: { message: 'user unsubscribed' } });
    expect(r[5]).toMatchObject({ state: 'queued', last_error: { class: 'batch_outcome_missing' } });
  });

  it('metrics and log lines are per job: a start and an outcome for each job of the batch', async () => {
    const started: string[] = [];
    const ended: string[] = [];
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    const line = (msg: string, fields?: Record<string, unknown>) => {
      lines.push({ msg, fields: fields ?? {} });
    };
    const logger = { debug: () => {}, info: line, warn: line, error: line };
    const definition = batchKind((jobs) =>
      jobs.map((j) => (j.payload.n === 1 ? j.dead(new Error('bad'), 'bad_item') : j.done())),
    );
    const ids = await enqueueItems(definition, 3);
    await worker(definition, {
      logger,
      metrics: {
        started: (job) => started.push(job.kind),
        ended: (job, outcome) => ended.push(`${job.kind} ${outcome}`),
        rateWaited: () => {},
        breakerMoved: () => {},
        invocationEnded: () => {},
      },
    }).runInvocation({ remainingMs: 30_000 });
    expect(started).toEqual(['bulk', 'bulk', 'bulk']);
    expect(ended.sort()).toEqual(['bulk completed', 'bulk completed', 'bulk dead']);
    const perJob = lines.filter((l) => l.msg === 'job').map((l) => [l.fields.jobId, l.fields.outcome]);
    expect(perJob.sort()).toEqual(
      [
        [ids[0], 'completed'],
        [ids[1], 'dead'],
        [ids[2], 'completed'],
      ].sort(),
    );
  });

  it('a throw fails every job of the batch with that error, each by its own attempts', async () => {
    const definition = batchKind(() => {
      throw new RetryError('bulk API down');
    });
    await enqueueItems(definition, 3);
    // The third job is on its last attempt: the same throw sends it to the DLQ.
    await t.admin.query(`update "${t.schema}".jobs set max_attempts = 1 where payload->>'n' = '2'`);
    const summary = await worker(definition).runInvocation({ remainingMs: 30_000 });
    expect(summary).toMatchObject({ claimed: 3, retried: 2, dead: 1, completed: 0 });
    const r = await rows();
    expect(r.map((x) => x.state)).toEqual(['queued', 'queued', 'dead']);
    expect(r[2].dead_reason).toBe('max_attempts');
    for (const x of r) expect(x.last_error).toMatchObject({ message: 'bulk API down' });
  });

  it('groups the claimed jobs into batches of at most size, one slot each; the last one is partial', async () => {
    const sizes: number[] = [];
    let running = 0;
    let most = 0;
    const definition = batchKind(
      async (jobs) => {
        running++;
        most = Math.max(most, running);
        sizes.push(jobs.length);
        await nextTurn();
        running--;
        return jobs.map((j) => j.done(j.payload.n * 2));
      },
      { size: 10 },
    );
    await enqueueItems(definition, 25);
    const summary = await worker(definition, { concurrency: 2, batchSize: 2 }).runInvocation({ remainingMs: 30_000 });
    expect(summary).toMatchObject({ claimed: 25, completed: 25, stoppedBecause: 'drained' });
    // Claims ask for batch.size per free slot (not batchSize): two full batches, then the rest.
    expect(sizes).toEqual([10, 10, 5]);
    expect(most).toBeLessThanOrEqual(2);
    const r = await rows();
    expect(r.every((x) => x.state === 'completed' && x.result === x.n * 2)).toBe(true);
  });

  it('a job whose stored payload fails the schema is settled on its own, and never handed to the handler', async () => {
    const seen: number[] = [];
    const definition = batchKind((jobs) => {
      seen.push(...jobs.map((j) => j.payload.n));
      return jobs.map((j) => j.done());
    });
    await enqueueItems(definition, 2);
    await t.admin.query(`update "${t.schema}".jobs set payload = '{"n":"not a number"}' where payload->>'n' = '1'`);
    const summary = await worker(definition).runInvocation({ remainingMs: 30_000 });
    expect(seen).toEqual([0]);
    expect(summary).toMatchObject({ completed: 1, dead: 1 });
    expect((await rows()).map((x) => [x.state, x.dead_reason])).toEqual([
      ['completed', null],
      ['dead', 'validation_error'],
    ]);
  });

  it("the kind's timeout covers the batch: its signal fires, and every job is retried as a timed-out job", async () => {
    const clock = new ManualClock();
    let reason: unknown;
    const definition = batchKind(
      async (jobs, ctx) => {
        clock.advance(300); // the batch's timeout passes on the invocation's clock
        reason = ctx.signal.reason;
        return jobs.map((j) => j.done()); // too late: the jobs already ended
      },
      { timeoutMs: 300 },
    );
    await enqueueItems(definition, 3);
    const summary = await worker(definition, { clock }).runInvocation({ remainingMs: 10_000 });
    expect((reason as Error).message).toMatch(/timed out after 300 ms/);
    expect(summary).toMatchObject({ completed: 0, retried: 3 });
    for (const x of await rows()) expect(x).toMatchObject({ state: 'queued', last_error: { class: 'timeout' } });
  });

  it('a batch starts only when its timeout fits the time left, like a single job', async () => {
    let called = false;
    const definition = batchKind(
      (jobs) => {
        called = true;
        return jobs.map((j) => j.done());
      },
      { timeoutMs: 5_000 },
    );
    await enqueueItems(definition, 2);
    const summary = await worker(definition).runInvocation({ remainingMs: 4_000 });
    expect(called).toBe(false);
    expect(summary.claimed).toBe(0);
    expect((await rows()).map((x) => x.state)).toEqual(['queued', 'queued']);
  });

  it("leases are per job: another invocation cannot claim a running batch's jobs; progress and lease extension are per job", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = false;
    let extended: string[] = [];
    const definition = batchKind(async (jobs, ctx) => {
      started = true;
      for (const j of jobs) expect(await j.reportProgress({ seen: j.payload.n })).toBe(true);
      extended = await ctx.extendLeases(60_000);
      await gate;
      return jobs.map((j) => j.done());
    });
    const ids = await enqueueItems(definition, 3);
    const first = worker(definition, { drain: false }).runInvocation({ remainingMs: 30_000 });
    await until(() => started && extended.length > 0);
    const other = batchKind(() => [], {});
    const second = await worker(other, { name: 'other' }).runInvocation({ remainingMs: 30_000 });
    expect(second.claimed).toBe(0);
    expect(extended.sort()).toEqual([...ids].sort());
    const leases = await t.admin.query(
      `select extract(epoch from lease_expires_at - now())::int as s from "${t.schema}".jobs`,
    );
    for (const l of leases.rows) expect(l.s).toBeGreaterThan(50);
    release();
    expect(await first).toMatchObject({ completed: 3 });
    expect((await rows()).map((x) => x.progress)).toEqual([{ seen: 0 }, { seen: 1 }, { seen: 2 }]);
  });

  it('with maxWaitMs, a short batch claims again to fill before it starts (on the supplied clock)', async () => {
    const clock = new PollClock();
    const sizes: number[] = [];
    const definition = batchKind(
      (jobs) => {
        sizes.push(jobs.length);
        return jobs.map((j) => j.done());
      },
      { size: 5, maxWaitMs: 500 },
    );
    await enqueueItems(definition, 2);
    const run = worker(definition, { clock, lingerMs: 0 }).runInvocation({ remainingMs: 30_000 });
    // The first claim took 2, and the fill's claim found no more: the batch waits for its next poll.
    await until(() => clock.polls > 0);
    expect(sizes).toEqual([]);
    await enqueueItems(definition, 3, 2);
    // The next fill claim (every maxWaitMs / 5) finds the other three: the batch is full and starts.
    clock.advance(100);
    await until(() => sizes.length > 0);
    const summary = await run;
    expect(sizes).toEqual([5]);
    expect(summary).toMatchObject({ claimed: 5, completed: 5 });
    expect(clock.now() - START).toBe(100); // it started at the poll that filled it, before maxWaitMs
  });

  it('with maxWaitMs, a batch that does not fill starts with what it has when the wait is over', async () => {
    const clock = new PollClock();
    const sizes: number[] = [];
    const definition = batchKind(
      (jobs) => {
        sizes.push(jobs.length);
        return jobs.map((j) => j.done());
      },
      { size: 5, maxWaitMs: 400 },
    );
    await enqueueItems(definition, 2);
    const run = worker(definition, { clock }).runInvocation({ remainingMs: 30_000 });
    // Poll by poll (every 80 ms): each fill claim finds nothing, until the 400 ms are over.
    const startedAt: number[] = [];
    while (sizes.length === 0) {
      await until(() => clock.polls > 0 || sizes.length > 0);
      if (sizes.length > 0) break;
      expect(clock.now() - START).toBeLessThan(400);
      clock.advance(80);
      await until(() => clock.polls > 0 || sizes.length > 0);
      if (sizes.length > 0) startedAt.push(clock.now() - START);
    }
    expect(sizes).toEqual([2]);
    expect(startedAt).toEqual([400]);
    expect(await run).toMatchObject({ claimed: 2, completed: 2 });
  });

  it('a job past its deadline is not handed to the handler: it goes to the DLQ as deadline_exceeded', async () => {
    const seen: number[] = [];
    const definition = batchKind((jobs) => {
      seen.push(...jobs.map((j) => j.payload.n));
      return jobs.map((j) => j.done());
    });
    await q.enqueueMany(t.db, [
      definition.with({ n: 0 }, { deadline: new Date(Date.now() + 60_000) }),
      definition.with({ n: 1 }),
    ]);
    const later = new Date(Date.now() + 120_000);
    const summary = await worker(definition, { test: { now: () => later } }).runInvocation({ remainingMs: 30_000 });
    expect(seen).toEqual([1]);
    expect(summary).toMatchObject({ completed: 1 });
    expect((await rows()).map((x) => [x.state, x.dead_reason])).toEqual([
      ['dead', 'deadline_exceeded'],
      ['completed', null],
    ]);
  });

  it('priorities decide which jobs a batch takes first', async () => {
    const calls: number[][] = [];
    const definition = batchKind(
      (jobs) => {
        calls.push(jobs.map((j) => j.payload.n));
        return jobs.map((j) => j.done());
      },
      { size: 2 },
    );
    await q.enqueueMany(t.db, [
      definition.with({ n: 0 }, { priority: 5 }),
      definition.with({ n: 1 }, { priority: -5 }),
      definition.with({ n: 2 }),
      definition.with({ n: 3 }, { priority: -1 }),
    ]);
    await worker(definition, { concurrency: 1 }).runInvocation({ remainingMs: 30_000 });
    expect(calls).toEqual([
      [1, 3],
      [2, 0],
    ]);
  });

  it('dedupe stays per job at enqueue, and an ordering key is refused at enqueue', async () => {
    const definition = batchKind((jobs) => jobs.map((j) => j.done()));
    const a = await q.enqueue(t.db, definition, { n: 1 }, { dedupe: { key: 'k' } });
    const b = await q.enqueue(t.db, definition, { n: 2 }, { dedupe: { key: 'k' } });
    expect(b.id).toBe(a.id);
    await expect(q.enqueue(t.db, definition, { n: 3 }, { orderingKey: 'order-1' })).rejects.toThrow(
      InvalidOptionsError,
    );
    await expect(q.enqueue(t.db, definition, { n: 3 }, { orderingKey: 'order-1' })).rejects.toThrow(
      /batch kind takes no orderingKey/,
    );
  });

  it('an answer that is not a list of outcomes retries every job; a hand-made outcome counts as none', async () => {
    let call = 0;
    const definition = batchKind(
      (jobs) => {
        call++;
        if (call === 1) return undefined as never;
        // Not made by job.done(): ignored, so the job has no outcome.
        return [
          { jobId: (jobs[0] as BatchJob<Item>).id, kind: 'done' as const },
          ...jobs.slice(1).map((j) => j.done()),
        ];
      },
      { size: 2 },
    );
    await enqueueItems(definition, 2);
    expect(await worker(definition, { drain: false }).runInvocation({ remainingMs: 30_000 })).toMatchObject({
      retried: 2,
    });
    expect((await rows()).map((x) => x.last_error?.class)).toEqual(['batch_answer_invalid', 'batch_answer_invalid']);
    await t.admin.query(`update "${t.schema}".jobs set run_at = now()`);
    expect(await worker(definition, { drain: false }).runInvocation({ remainingMs: 30_000 })).toMatchObject({
      retried: 1,
      completed: 1,
    });
    expect((await rows()).map((x) => [x.state, x.last_error?.class])).toEqual([
      ['queued', 'batch_outcome_missing'],
      ['completed', 'batch_answer_invalid'],
    ]);
  });
});
