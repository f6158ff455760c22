import { sql } from 'drizzle-orm';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { CancelError, ConfigError, DiscardError, RetryAfterError } from '../../base/errors.js';
import { defineJob, type JobContext } from '../../core/jobs.js';
import { type Logger, silentLogger } from '../../core/logger.js';
import { createWorker, JobAbort, type WorkerOptions } from '../../core/worker/index.js';
import { claimJobs } from '../../db/statements/claim.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('worker', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const task = z.object({ n: z.number().int() });
type Handler = (payload: { n: number }, ctx: JobContext) => unknown;

function kind(handler: Handler, extra: { timeoutMs?: number; maxAttempts?: number; kind?: string } = {}) {
  return defineJob({
    kind: extra.kind ?? 'task',
    payload: task,
    timeoutMs: extra.timeoutMs ?? 2_000,
    maxAttempts: extra.maxAttempts ?? 5,
    backoff: { type: 'constant', delayMs: 60_000 },
    handler,
  });
}

function worker(definition: ReturnType<typeof kind>, options: Partial<WorkerOptions> = {}) {
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

const enqueueTasks = (definition: ReturnType<typeof kind>, n: number, from = 0) =>
  q.enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => definition.with({ n: from + i })),
  );

const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

/** One turn of the event loop: every microtask queued so far has run. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

const job = async (id: string) => (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [id])).rows[0];

describe(`the invocation loop (${testDriver()})`, () => {
  it('drains every runnable job, batch after batch, and returns the summary', async () => {
    const seen: number[] = [];
    const definition = kind((p) => {
      seen.push(p.n);
    });
    await enqueueTasks(definition, 45);
    const summary = await worker(definition, { concurrency: 4, batchSize: 10 }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({
      claimed: 45,
      completed: 45,
      retried: 0,
      dead: 0,
      released: 0,
      leaseLost: 0,
      stoppedBecause: 'drained',
    });
    expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: 45 }, (_, i) => i));
    expect(await states()).toEqual([{ state: 'completed', n: 45 }]);
  });

  it("writes a finished job's outcome within flushIntervalMs, even while a slow job still runs", async () => {
    const clock = new ManualClock();
    let fastId = '';
    let fastRan!: () => void;
    const fastFinished = new Promise<void>((resolve) => {
      fastRan = resolve;
    });
    // The worker logs a job's line once the database has taken its outcome.
    let fastLogged!: () => void;
    const fastWritten = new Promise<void>((resolve) => {
      fastLogged = resolve;
    });
    const logger: Logger = {
      ...silentLogger,
      isEnabled: () => true,
      info: (message, fields) => {
        if (message === 'job' && fields?.jobId === fastId) fastLogged();
      },
    };
    let fastStateSeenBySlow: string | undefined;
    const definition = kind(async (p) => {
      if (p.n === 0) return fastRan();
      await fastFinished;
      await nextTurn(); // the fast job's outcome is in the buffer now, its flush timer set
      clock.advance(50); // flushIntervalMs pass on the invocation's clock while this job runs
      await fastWritten;
      fastStateSeenBySlow = (await job(fastId)).state;
    });
    fastId = (await q.enqueue(t.db, definition, { n: 0 })).id;
    await enqueueTasks(definition, 1, 1);
    // A free slot and a short claim: the loop claims no more until both are done, so only the
    // flush timer can write the fast job's outcome while the slow one runs.
    const summary = await worker(definition, { clock, concurrency: 3, flushIntervalMs: 50, logger }).runInvocation({
      remainingMs: 10_000,
    });
    expect(fastStateSeenBySlow).toBe('completed');
    expect(summary).toMatchObject({ completed: 2, stoppedBecause: 'drained' });
  }, 15_000);

  it('never runs more handlers at once than its concurrency', async () => {
    let running = 0;
    let peak = 0;
    const definition = kind(async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setImmediate(resolve));
      running--;
    });
    await enqueueTasks(definition, 30);
    await worker(definition, { concurrency: 3, batchSize: 7 }).runInvocation({ remainingMs: 60_000 });
    expect(peak).toBe(3);
    expect(await states()).toEqual([{ state: 'completed', n: 30 }]);
  });

  it('claims no more than batchSize per statement when batchSize is below concurrency', async () => {
    const definition = kind(() => {});
    await enqueueTasks(definition, 12);
    const summary = await worker(definition, { concurrency: 10, batchSize: 3, drain: false }).runInvocation({
      remainingMs: 60_000,
    });
    expect(summary).toMatchObject({ claimed: 3, completed: 3, stoppedBecause: 'batch_done' });
    expect(await states()).toEqual([
      { state: 'completed', n: 3 },
      { state: 'queued', n: 9 },
    ]);
  });

  it('with drain off, runs one batch and stops', async () => {
    const definition = kind(() => {});
    await enqueueTasks(definition, 12);
    const summary = await worker(definition, { concurrency: 5, drain: false }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ claimed: 5, completed: 5, stoppedBecause: 'batch_done' });
  });

  it('maps what handlers throw to retry, retry-after, discard and cancel', async () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const definition = kind((p) => {
      switch (p.n) {
        case 0:
          throw new Error('plain failure');
        case 1:
          throw new RetryAfterError(5_000, 'rate limited', { response: { status: 429, body: 'slow down' } });
        case 2:
          throw new DiscardError('no such user', { response: { status: 404, body: 'not found' } });
        case 3:
          throw new CancelError('order was refunded');
        case 4:
          throw 'a string';
        case 5:
          throw undefined;
        case 6:
          throw cyclic;
        case 7:
          return Promise.reject(new Error('late rejection'));
      }
    });
    const ids = (await enqueueTasks(definition, 8)).map((r) => r.id);
    const summary = await worker(definition, { concurrency: 8 }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ claimed: 8, completed: 0, retried: 6, dead: 1, cancelled: 1 });
    const rows = await Promise.all(ids.map(job));
    const delay = (r: { run_at: Date; updated_at: Date }) =>
      Math.round((r.run_at.getTime() - r.updated_at.getTime()) / 1000);
    expect(rows[0]).toMatchObject({
      state: 'queued',
      last_error: expect.objectContaining({ class: 'Error', message: 'plain failure' }),
    });
    expect(delay(rows[0])).toBe(60); // the kind's constant backoff
    expect(rows[1]).toMatchObject({
      state: 'queued',
      last_error: expect.objectContaining({ responseStatus: 429, responseBody: 'slow down' }),
    });
    expect(delay(rows[1])).toBe(5);
    expect(rows[2]).toMatchObject({
      state: 'dead',
      dead_reason: 'http_4xx',
      last_error: expect.objectContaining({ responseStatus: 404 }),
    });
    expect(rows[3]).toMatchObject({
      state: 'cancelled',
      last_error: expect.objectContaining({ message: 'order was refunded' }),
    });
    expect(rows[4].last_error).toMatchObject({ class: 'NonError', message: 'a string' });
    expect(rows[5].last_error).toMatchObject({ class: 'NonError', message: 'handler threw undefined' });
    expect(rows[6].last_error).toMatchObject({ class: 'NonError', message: '{"a":1,"self":"[Circular]"}' });
    expect(rows[7].last_error).toMatchObject({ message: 'late rejection' });
    expect(rows[0].last_error.stack).toContain('plain failure');
  });

  it("schedules retries on the kind's backoff curve, within its jitter bounds", async () => {
    const definition = defineJob({
      kind: 'task',
      payload: task,
      timeoutMs: 2_000,
      maxAttempts: 10,
      backoff: { type: 'exponential', baseMs: 10_000, factor: 3, maxMs: 100_000, jitter: 0.5 },
      handler: () => {
        throw new Error('still failing');
      },
    });
    const { id } = await q.enqueue(t.db, definition, { n: 0 });
    const w = createWorker({ db: t.db, schema: t.schema, jobs: [definition], logger: silentLogger });
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      await w.runInvocation({ remainingMs: 60_000 });
      const r = await job(id);
      expect(r).toMatchObject({ state: 'queued', attempt });
      delays.push((r.run_at.getTime() - r.updated_at.getTime()) / 1000);
      // Time passes: the retry comes due (the database clock is moved, nobody sleeps).
      await t.admin.query(`update "${t.schema}".jobs set run_at = clock_timestamp() where id = $1`, [id]);
    }
    const ceilings = [10, 30, 90, 100];
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(ceilings[i]! * 0.5 - 0.01);
      expect(d).toBeLessThanOrEqual(ceilings[i]! + 0.01);
    });
  });

  it('an error text PostgreSQL cannot store (NUL, a lone surrogate) neither fails the batch nor loses the other outcomes', async () => {
    const definition = kind((p) => {
      if (p.n === 0) throw new Error(`bad \u0000 byte and half an emoji ${'😀'.slice(0, 1)}`);
    });
    const ids = (await enqueueTasks(definition, 4)).map((r) => r.id);
    const summary = await worker(definition, { concurrency: 4 }).runInvocation({ remainingMs: 10_000 });
    expect(summary).toMatchObject({ stoppedBecause: 'drained', completed: 3, retried: 1 });
    const failed = await job(ids[0] as string);
    expect(failed.state).toBe('queued');
    expect(failed.last_error.message).toBe('bad \uFFFD byte and half an emoji \uFFFD');
  });

  it('a custom backoff that throws falls back to the default curve; no outcome is lost', async () => {
    const definition = defineJob({
      kind: 'task',
      payload: task,
      timeoutMs: 2_000,
      backoff: () => {
        throw new Error('bad backoff');
      },
      handler: (p) => {
        if (p.n === 0) throw new Error('fails');
      },
    });
    await enqueueTasks(definition, 5);
    const summary = await worker(definition, { concurrency: 5 }).runInvocation({ remainingMs: 10_000 });
    expect(summary).toMatchObject({ stoppedBecause: 'drained', completed: 4, retried: 1 });
  });

  it('a failure on the last attempt ends dead(max_attempts), with the error history', async () => {
    const definition = kind(
      () => {
        throw new Error('always');
      },
      { maxAttempts: 1 },
    );
    const { id } = await q.enqueue(t.db, definition, { n: 0 });
    const summary = await worker(definition).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ dead: 1, retried: 0 });
    expect(await job(id)).toMatchObject({ state: 'dead', dead_reason: 'max_attempts', attempt: 1 });
  });

  it('a job past its deadline is never handed to its handler', async () => {
    let called = false;
    const definition = kind(() => {
      called = true;
    });
    const { id } = await q.enqueue(t.db, definition, { n: 1 }, { deadline: new Date(Date.now() + 60_000) });
    await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 second' where id = $1`, [id]);
    const summary = await worker(definition).runInvocation({ remainingMs: 60_000 });
    expect(called).toBe(false);
    expect(summary).toMatchObject({ claimed: 0, dead: 1 });
    expect(await job(id)).toMatchObject({ state: 'dead', dead_reason: 'deadline_exceeded' });
  });

  it('a stored payload that no longer matches the schema goes to the DLQ as validation_error', async () => {
    const definition = kind(() => {});
    await t.admin.query(`insert into "${t.schema}".jobs (kind, payload) values ('task', '{"n": "not a number"}')`);
    const summary = await worker(definition).runInvocation({ remainingMs: 60_000 });
    expect(summary.dead).toBe(1);
    expect((await states())[0]).toEqual({ state: 'dead', n: 1 });
    const { rows } = await t.admin.query(`select dead_reason from "${t.schema}".jobs`);
    expect(rows[0].dead_reason).toBe('validation_error');
  });

  it('gives handlers progress reports and lease extensions, both fenced', async () => {
    const definition = kind(async (_p, ctx) => {
      expect(await ctx.reportProgress({ step: 2, of: 3 })).toBe(true);
      expect(await ctx.extendLease(120_000)).toBe(true);
      expect(ctx.attempt).toBe(1);
    });
    const { id } = await q.enqueue(t.db, definition, { n: 1 }, { correlationId: 'req-9' });
    const summary = await worker(definition).runInvocation({ remainingMs: 60_000 });
    expect(summary.completed).toBe(1);
    expect(await job(id)).toMatchObject({ state: 'completed', progress: { step: 2, of: 3 } });
  });

  it('a holder that lost its lease writes nothing and counts lease_lost; the new holder is untouched', async () => {
    let signalReason: unknown;
    const steal = () =>
      claimJobs(t.db.executor, t.schema, {
        leases: [{ kind: 'task', leaseMs: 600_000 }],
        limit: 1,
        invocationId: 'thief',
        now: new Date(Date.now() + 3_600_000),
      });
    const definition = kind(async (p, ctx) => {
      await steal();
      if (p.n === 0) {
        // Checks in: finds out, and its signal fires.
        expect(await ctx.reportProgress('half')).toBe(false);
        signalReason = ctx.signal.reason;
      }
      // n = 1 never checks: its completion is fenced off at write time.
    });
    const ids = (await enqueueTasks(definition, 2)).map((r) => r.id);
    const summary = await worker(definition, { concurrency: 2 }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ claimed: 2, completed: 0, leaseLost: 2 });
    expect((signalReason as Error).message).toMatch(/lease was lost/);
    for (const id of ids) expect(await job(id)).toMatchObject({ state: 'running', locked_by: 'thief', progress: null });
  });

  it('aborts a handler at its timeout and retries it with class timeout; a handler that ignores the signal does not hold the loop', async () => {
    const clock = new ManualClock();
    let aborted: unknown;
    const definition = kind(
      async (_p, ctx) => {
        await null; // the attempt's timer is set once its handler has started
        clock.advance(150); // the job's timeout passes on the invocation's clock
        aborted = ctx.signal.reason;
        await new Promise(() => {}); // and it ignores its signal
      },
      { timeoutMs: 150 },
    );
    const { id } = await q.enqueue(t.db, definition, { n: 1 });
    // A loop held by the handler would run into its deadline: 'drained' says it went on and found
    // the queue empty (the retry waits out its backoff).
    const summary = await worker(definition, { clock, safetyMarginMs: 200 }).runInvocation({ remainingMs: 30_000 });
    expect(summary).toMatchObject({ claimed: 1, retried: 1, stoppedBecause: 'drained' });
    expect((aborted as Error).message).toMatch(/timed out after 150 ms/);
    expect((await job(id)).last_error).toMatchObject({ class: 'timeout' });
  });

  it("an abandoned attempt's retry is not due before its lease ends, on the database's clock even when the function's clock runs ahead", async () => {
    const definition = defineJob({
      kind: 'abandoned',
      payload: task,
      timeoutMs: 150,
      backoff: { type: 'constant', delayMs: 0 },
      handler: () => new Promise(() => {}), // ignores its signal: it may still be running after the abort
    });
    const { id } = await q.enqueue(t.db, definition, { n: 1 });
    const realNow = Date.now.bind(Date);
    const skew = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 60_000);
    try {
      const summary = await createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [definition],
        logger: silentLogger,
        leaseGraceMs: 1_000,
        safetyMarginMs: 200,
        drain: false,
      }).runInvocation({ remainingMs: 2_000 });
      expect(summary).toMatchObject({ claimed: 1, retried: 1 });
    } finally {
      skew.mockRestore();
    }
    // Lease = 150 ms timeout + 1,000 ms grace from the claim (attempted_at).
    const { rows } = await t.admin.query(
      `select state, extract(epoch from run_at - attempted_at) * 1000 as after_ms from "${t.schema}".jobs where id = $1`,
      [id],
    );
    expect(rows[0].state).toBe('queued');
    expect(Number(rows[0].after_ms)).toBeGreaterThanOrEqual(1_150);
  });
});

describe(`the time budget (${testDriver()})`, () => {
  // Each run takes 1.9 s of its 2 s timeout.
  const twoSecondJob = (clock: ManualClock) =>
    kind(
      () => {
        clock.advance(1_900);
      },
      { timeoutMs: 2_000 },
    );

  it('with 5 s left and 2 s jobs, claims only what can finish and stops', async () => {
    const clock = new ManualClock();
    const definition = twoSecondJob(clock);
    await enqueueTasks(definition, 10);
    const summary = await worker(definition, { clock, concurrency: 1, batchSize: 1 }).runInvocation({
      remainingMs: 5_000,
    });
    // Started at 0 s and 1.9 s, a 2 s job ends by 3.9 s ≤ 5 s − 0.5 s margin; at 3.8 s it would not.
    expect(summary).toMatchObject({ claimed: 2, completed: 2, released: 0, stoppedBecause: 'deadline' });
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where attempt > 0`);
    expect(rows[0].n).toBe(2);
  });

  it('releases claimed jobs it could not start in time: no attempt counted, claimable at once', async () => {
    const clock = new ManualClock();
    const definition = twoSecondJob(clock);
    await enqueueTasks(definition, 5);
    // A long grace: the local-queue lease guard (next test) stays out of the way here.
    const summary = await worker(definition, {
      clock,
      concurrency: 1,
      batchSize: 5,
      leaseGraceMs: 10_000,
    }).runInvocation({
      remainingMs: 5_000,
    });
    expect(summary).toMatchObject({ claimed: 5, completed: 2, released: 3 });
    const { rows } = await t.admin.query(
      `select count(*)::int as n from "${t.schema}".jobs where state = 'queued' and attempt = 0 and lease_expires_at is null`,
    );
    expect(rows[0].n).toBe(3);
    const next = await worker(definition, { clock, concurrency: 1 }).runInvocation({ remainingMs: 60_000 });
    expect(next.completed).toBe(3);
  });

  it('a job that waited locally until its lease could no longer cover it is given back, not started', async () => {
    const clock = new ManualClock();
    const definition = twoSecondJob(clock);
    await enqueueTasks(definition, 2);
    // Lease = 2 s timeout + 0.5 s grace. The second job waits 1.9 s behind the first: only 0.6 s
    // of its lease is left, so it is released and claimed again with a fresh lease.
    const summary = await worker(definition, { clock, concurrency: 1, batchSize: 2, leaseGraceMs: 500 }).runInvocation({
      remainingMs: 5_000,
    });
    expect(summary).toMatchObject({ claimed: 3, completed: 2, released: 1 });
    const { rows } = await t.admin.query(`select attempt from "${t.schema}".jobs order by id`);
    expect(rows).toEqual([{ attempt: 1 }, { attempt: 1 }]);
  });

  it('does not claim kinds whose timeout exceeds the time left', async () => {
    const clock = new ManualClock();
    const slow = kind(() => {}, { timeoutMs: 10_000 });
    await enqueueTasks(slow, 3);
    const summary = await worker(slow, { clock }).runInvocation({ remainingMs: 5_000 });
    // Its only kind never fits: it says so rather than wait for its deadline (test/core/unfit-kinds).
    expect(summary).toMatchObject({ claimed: 0, stoppedBecause: 'no_kind_fits' });
    expect(await states()).toEqual([{ state: 'queued', n: 3 }]);
  });
});

describe(`round trips (${testDriver()})`, () => {
  it('a batch of more than 128 outcomes is written by its own statement, and the next claim carries none', async () => {
    const definition = kind(() => {});
    await enqueueTasks(definition, 300);
    const w = worker(definition, { concurrency: 300, batchSize: 300 });
    const { result, texts } = await captureStatements(testDriver(), () => w.runInvocation({ remainingMs: 60_000 }));
    expect(result).toMatchObject({ claimed: 300, completed: 300, stoppedBecause: 'drained' });
    // DLQ sweep, claim, then the 300 completions alone and a claim with nothing riding along
    // (sent side by side: with a second connection in the pool they run at the same time).
    const shape = (text: string) =>
      // Every claim carries a settle (empty when nothing rides along): the claim, or a settle alone.
      /\bready as\b/.test(text) ? 'claim' : /\bsettle_input as\b/.test(text) ? 'settle' : 'other';
    expect(texts).toHaveLength(4);
    expect(texts.slice(0, 2).map(shape)).toEqual(['other', 'claim']);
    expect(texts.slice(2).map(shape).sort()).toEqual(['claim', 'settle']);
    expect(await states()).toEqual([{ state: 'completed', n: 300 }]);
  });
});

describe(`a settle beside a claim (${testDriver()})`, () => {
  it('when the settle fails and the claim beside it succeeds, the claimed jobs are given back, not left to their leases', async () => {
    const definition = kind(() => {});
    // Completions of jobs with n = -1 are refused by the database, so that settle statement fails.
    await t.admin.query(`
      create function "${t.schema}".refuse_completion() returns trigger language plpgsql as $$
      begin
        if new.state = 'completed' and new.payload->>'n' = '-1' then raise exception 'completion refused'; end if;
        return new;
      end $$;
      create trigger refuse_completion before update on "${t.schema}".jobs
        for each row execute function "${t.schema}".refuse_completion();`);
    try {
      await q.enqueueMany(
        t.db,
        Array.from({ length: 150 }, () => definition.with({ n: -1 })),
      );
      await enqueueTasks(definition, 50);
      const summary = await worker(definition, { concurrency: 150, batchSize: 150 }).runInvocation({
        remainingMs: 60_000,
      });
      // The 150 outcomes (> 128) are settled on their own, beside the claim of the other 50.
      expect(summary).toMatchObject({ claimed: 200, completed: 0, released: 50, stoppedBecause: 'error' });
      expect(summary.error).toMatch(/completion refused/);
      const { rows } = await t.admin.query(
        `select state, attempt, (lease_expires_at is null) as no_lease, count(*)::int as n
         from "${t.schema}".jobs group by 1, 2, 3 order by 1`,
      );
      expect(rows).toEqual([
        { state: 'queued', attempt: 0, no_lease: true, n: 50 }, // released: claimable at once, no attempt counted
        { state: 'running', attempt: 1, no_lease: false, n: 150 }, // their outcome not written: leases will expire
      ]);
    } finally {
      await t.admin.query(`drop function "${t.schema}".refuse_completion() cascade`);
    }
  });
});

describe(`outcomes of a statement that failed (${testDriver()})`, () => {
  it('outcomes riding along with a claim that fails are written by the final flush, not left to their leases', async () => {
    // The claim statement fails once the flag row exists (the trigger refuses queued → running);
    // the outcomes it carried would have been written by it, had it succeeded.
    await t.admin.query(`
      create table "${t.schema}".refuse_claims (on_ boolean);
      create function "${t.schema}".refuse_claim() returns trigger language plpgsql as $$
      begin
        if old.state = 'queued' and new.state = 'running' and exists (select 1 from "${t.schema}".refuse_claims)
        then raise exception 'claim refused'; end if;
        return new;
      end $$;
      create trigger refuse_claim before update on "${t.schema}".jobs
        for each row execute function "${t.schema}".refuse_claim();`);
    try {
      let refuseClaims: Promise<unknown> | undefined;
      // Every handler of the first batch waits until claims are refused, then completes.
      const definition = kind(async () => {
        refuseClaims ??= t.admin.query(`insert into "${t.schema}".refuse_claims values (true)`);
        await refuseClaims;
      });
      const ids = (await enqueueTasks(definition, 10)).map((r) => r.id);
      const summary = await worker(definition, { concurrency: 5, batchSize: 5 }).runInvocation({
        remainingMs: 60_000,
      });
      expect(summary).toMatchObject({ claimed: 5, completed: 5, stoppedBecause: 'error' });
      expect(summary.error).toMatch(/claim refused/);
      const { rows } = await t.admin.query(
        `select state, attempt, count(*)::int as n from "${t.schema}".jobs where id = any($1::bigint[])
         group by 1, 2 order by 1`,
        [ids],
      );
      expect(rows).toEqual([
        { state: 'completed', attempt: 1, n: 5 },
        { state: 'queued', attempt: 0, n: 5 },
      ]);
    } finally {
      await t.admin.query(`drop function "${t.schema}".refuse_claim() cascade; drop table "${t.schema}".refuse_claims`);
    }
  });

  it('outcomes of a stand-alone settle that fails are written again by the final flush', async () => {
    const definition = kind(() => {});
    // The first completion written is refused once (a sequence is not rolled back with the statement).
    await t.admin.query(`
      create sequence "${t.schema}".completions;
      create function "${t.schema}".refuse_once() returns trigger language plpgsql as $$
      begin
        if new.state = 'completed' then
          if nextval('"${t.schema}".completions') = 1 then raise exception 'completion refused once'; end if;
        end if;
        return new;
      end $$;
      create trigger refuse_once before update on "${t.schema}".jobs
        for each row execute function "${t.schema}".refuse_once();`);
    try {
      await enqueueTasks(definition, 200);
      // 150 outcomes (> 128) are settled on their own, beside the claim of the other 50.
      const summary = await worker(definition, { concurrency: 150, batchSize: 150 }).runInvocation({
        remainingMs: 60_000,
      });
      expect(summary).toMatchObject({ claimed: 200, completed: 150, released: 50, stoppedBecause: 'error' });
      expect(summary.error).toMatch(/completion refused once/);
      expect(await states()).toEqual([
        { state: 'completed', n: 150 },
        { state: 'queued', n: 50 },
      ]);
    } finally {
      await t.admin.query(`drop function "${t.schema}".refuse_once() cascade; drop sequence "${t.schema}".completions`);
    }
  });
});

/** Every property a handler can reach on its context, its own and its prototypes' (Object's aside). */
function reachable(ctx: object): string[] {
  const names = new Set<string>();
  for (let o: object | null = ctx; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const key of Reflect.ownKeys(o)) if (key !== 'constructor') names.add(String(key));
  }
  return [...names].sort();
}

const JOB_CONTEXT_MEMBERS = [
  'attempt',
  'correlationId',
  'extendLease',
  'id',
  'kind',
  'lastProgress',
  'leaseToken',
  'logger',
  'maxAttempts',
  'parents',
  'queue',
  'reportProgress',
  'signal',
  'sleep',
  'sleepUntil',
  'step',
  'waitForSignal',
];

describe(`the handler's context (${testDriver()})`, () => {
  it("has JobContext's members and nothing else: no abort, no _deps, no _onAbort, nothing of the loop", async () => {
    let members: string[] = [];
    let fields: unknown;
    const definition = kind((_p, ctx) => {
      members = reachable(ctx);
      fields = { ...ctx };
    });
    const { id } = await q.enqueue(t.db, definition, { n: 1 }, { correlationId: 'req-1' });
    const summary = await worker(definition).runInvocation({ remainingMs: 60_000 });
    expect(summary.completed).toBe(1);
    expect(members).toEqual(JOB_CONTEXT_MEMBERS);
    expect(members).not.toContain('abort');
    // Its own fields are the job's metadata; spreading it does not make a signal or a logger.
    expect(fields).toEqual({
      id,
      kind: 'task',
      queue: 'default',
      attempt: 1,
      maxAttempts: 5,
      correlationId: 'req-1',
      leaseToken: expect.any(String),
    });
  });

  it('a handler cannot end or abort an attempt, its own or another, through its context', async () => {
    const signals: AbortSignal[] = [];
    let bothStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    let called = 0;
    const definition = kind(async (p, ctx) => {
      signals.push(ctx.signal);
      if (signals.length === 2) bothStarted();
      await started;
      if (p.n === 0) {
        // Every function its context leads to, besides the documented calls, called with an abort.
        for (let o: object | null = ctx; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
          for (const key of Reflect.ownKeys(o)) {
            if (key === 'constructor' || JOB_CONTEXT_MEMBERS.includes(String(key))) continue;
            const value: unknown = Reflect.get(o, key, ctx);
            if (typeof value === 'function') {
              called++;
              value.call(ctx, new JobAbort('timeout', 'aborted by a handler'));
            }
          }
        }
      }
      await nextTurn();
    });
    await enqueueTasks(definition, 2);
    const summary = await worker(definition, { concurrency: 2 }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ claimed: 2, completed: 2, retried: 0 });
    expect(signals.map((s) => s.aborted)).toEqual([false, false]);
    expect(called).toBe(0); // there was nothing to call
  });
});

describe(`transactional handlers (${testDriver()})`, () => {
  if (testDriver() === 'neon-http') {
    // neon-http sends every statement as its own HTTP request: there is no transaction to hand a
    // handler, so none of the tests below can apply. What happens instead: the kind is refused
    // when the worker is built, before any job is claimed, with an error that says why.
    it('neon-http has no interactive transactions: createWorker refuses a transactional kind with a ConfigError', async () => {
      const definition = defineJob({ kind: 'tx-task', payload: task, transactional: true, handler: () => {} });
      const build = () => createWorker({ db: t.db, schema: t.schema, jobs: [definition], logger: silentLogger });
      expect(build).toThrow(ConfigError);
      expect(build).toThrow(
        /transactional, but the neon-http driver has no interactive transactions; use pg or neon-ws/,
      );
    });
    return;
  }

  const makeKind = () =>
    defineJob({
      kind: 'tx-task',
      payload: task,
      transactional: true,
      backoff: { type: 'constant', delayMs: 60_000 },
      handler: async (p, ctx) => {
        await ctx.tx.execute(sql`insert into ${sql.identifier(t.schema)}.side_effects (n) values (${p.n})`);
        if (p.n < 0) throw new Error('roll me back');
      },
    });

  it("a transactional handler's signal fires at its timeout, and its writes roll back", async () => {
    const clock = new ManualClock();
    let aborted: unknown;
    const definition = defineJob({
      kind: 'tx-slow',
      payload: task,
      transactional: true,
      timeoutMs: 200,
      backoff: { type: 'constant', delayMs: 60_000 },
      handler: async (p, ctx) => {
        await ctx.tx.execute(sql`insert into ${sql.identifier(t.schema)}.side_effects (n) values (${p.n})`);
        const { signal } = ctx;
        clock.advance(200); // the job's timeout passes on the invocation's clock
        aborted = signal.reason;
      },
    });
    await t.admin.query(`create table if not exists "${t.schema}".side_effects (n int)`);
    await t.admin.query(`truncate "${t.schema}".side_effects`);
    const { id } = await q.enqueue(t.db, definition, { n: 1 });
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [definition],
      logger: silentLogger,
      clock,
    }).runInvocation({ remainingMs: 10_000 });
    expect((aborted as Error).message).toMatch(/timed out after 200 ms/);
    expect(summary).toMatchObject({ completed: 0, retried: 1 });
    expect((await job(id)).last_error).toMatchObject({ class: 'timeout' });
    expect((await t.admin.query(`select n from "${t.schema}".side_effects`)).rows).toEqual([]);
  });

  it("a transactional handler's context has JobContext's members and the transaction, nothing else", async () => {
    let members: string[] = [];
    const definition = defineJob({
      kind: 'tx-members',
      payload: task,
      transactional: true,
      handler: (_p, ctx) => {
        members = reachable(ctx);
      },
    });
    await q.enqueue(t.db, definition, { n: 1 });
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [definition],
      logger: silentLogger,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary.completed).toBe(1);
    expect(members).toEqual([...JOB_CONTEXT_MEMBERS, 'tx'].sort());
  });

  it('commits the handler writes with the completion, and rolls them back on failure', async () => {
    const definition = makeKind();
    await t.admin.query(`create table if not exists "${t.schema}".side_effects (n int)`);
    await t.admin.query(`truncate "${t.schema}".side_effects`);
    await q.enqueueMany(t.db, [definition.with({ n: 1 }), definition.with({ n: -1 })]);
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [definition],
      logger: silentLogger,
    }).runInvocation({
      remainingMs: 60_000,
    });
    expect(summary).toMatchObject({ completed: 1, retried: 1 });
    const { rows } = await t.admin.query(`select n from "${t.schema}".side_effects`);
    expect(rows).toEqual([{ n: 1 }]);
  });
});
