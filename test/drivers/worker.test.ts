import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CancelError, ConfigError, DiscardError, RetryAfterError } from '../../base/errors.js';
import { getJob } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { replay } from '../../core/replay.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements, countStatements } from '../helpers/statements.js';

// The driver smoke set (test/drivers runs on every driver; test/core on pg only): the worker's
// invocation through the driver under test — claims and every outcome, a replayed dead job, the
// statements a batch takes (side by side on a pool), a failed statement, a statement still blocked
// at the deadline, a schema older than the code (told apart by the SQLSTATE each driver reports its
// own way), transactional handlers.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('drivers_worker', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const payload = z.object({ n: z.number().int() });
const run = (jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, ...options }).runInvocation({
    remainingMs: 60_000,
  });
const job = async (id: string) => (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [id])).rows[0];
const states = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;
const noop = defineJob({ kind: 'noop', payload, timeoutMs: 2_000, handler: () => {} });
const enqueueNoops = (n: number) =>
  q.enqueueMany(
    t.db,
    Array.from({ length: n }, (_, i) => noop.with({ n: i })),
  );

describe(`a worker invocation (${testDriver()})`, () => {
  it('claims and settles every outcome: completed with its result, retried on its backoff, dead, cancelled', async () => {
    const task = defineJob({
      kind: 'task',
      payload,
      timeoutMs: 2_000,
      maxAttempts: 5,
      backoff: { type: 'constant', delayMs: 60_000 },
      handler: (p) => {
        if (p.n === 1) throw new Error('plain failure');
        if (p.n === 2) throw new RetryAfterError(5_000, 'rate limited', { response: { status: 429, body: 'slow' } });
        if (p.n === 3) throw new DiscardError('no such user', { response: { status: 404, body: 'gone' } });
        if (p.n === 4) throw new CancelError('order was refunded');
        return { sent: p.n, to: 'ünïcødé' };
      },
    });
    const ids = (
      await q.enqueueMany(
        t.db,
        [0, 1, 2, 3, 4].map((n) => task.with({ n })),
      )
    ).map((r) => r.id);
    const summary = await run([task], { concurrency: 5 });
    expect(summary).toMatchObject({
      claimed: 5,
      completed: 1,
      retried: 2,
      dead: 1,
      cancelled: 1,
      leaseLost: 0,
      stoppedBecause: 'drained',
    });
    const [done, plain, rated, dead, cancelled] = await Promise.all(ids.map(job));
    expect(done).toMatchObject({ state: 'completed', attempt: 1, result: { sent: 0, to: 'ünïcødé' } });
    expect((await getJob(t.db, ids[0] as string, { schema: t.schema }))?.result).toEqual({ sent: 0, to: 'ünïcødé' });
    const delay = (r: { run_at: Date; updated_at: Date }) =>
      Math.round((r.run_at.getTime() - r.updated_at.getTime()) / 1000);
    expect(plain).toMatchObject({
      state: 'queued',
      attempt: 1,
      last_error: expect.objectContaining({ message: 'plain failure' }),
    });
    expect(delay(plain)).toBe(60);
    expect(rated).toMatchObject({ state: 'queued', last_error: expect.objectContaining({ responseStatus: 429 }) });
    expect(delay(rated)).toBe(5);
    expect(dead).toMatchObject({ state: 'dead', dead_reason: 'http_4xx' });
    expect(cancelled).toMatchObject({
      state: 'cancelled',
      last_error: expect.objectContaining({ message: 'order was refunded' }),
    });
  });

  it('a dead job replayed runs again and completes; replaying it twice replays it once', async () => {
    let fixed = false;
    const task = defineJob({
      kind: 'task',
      payload,
      timeoutMs: 2_000,
      maxAttempts: 1,
      handler: () => {
        if (!fixed) throw new Error('broken until fixed');
      },
    });
    const { id } = await q.enqueue(t.db, task, { n: 1 });
    expect(await run([task])).toMatchObject({ claimed: 1, dead: 1 });
    expect(await job(id)).toMatchObject({ state: 'dead', dead_reason: 'max_attempts', attempt: 1 });
    const options = { ids: [id], by: 'ops@example.com', schema: t.schema };
    expect(await replay(t.db, options)).toMatchObject({ replayed: [{ id }], refused: [] });
    expect(await replay(t.db, options)).toMatchObject({ replayed: [], refused: [{ id, state: 'queued' }] });
    fixed = true;
    expect(await run([task])).toMatchObject({ claimed: 1, completed: 1 });
    expect(await job(id)).toMatchObject({
      state: 'completed',
      attempt: 1,
      replay_count: 1,
      replayed_by: 'ops@example.com',
    });
  });
});

describe(`round trips (${testDriver()})`, () => {
  it('claim + completion of a batch takes the same number of statements for 1, 10 and 100 jobs', async () => {
    const counts: number[] = [];
    for (const size of [1, 10, 100]) {
      await t.admin.query(`truncate "${t.schema}".jobs`);
      await enqueueNoops(size);
      const { result, statements } = await countStatements(testDriver(), () =>
        run([noop], { concurrency: size, batchSize: size }),
      );
      expect(result.completed).toBe(size);
      counts.push(statements);
    }
    // The invocation's DLQ sweep, one claim, then one statement that writes the completions and
    // finds the queue empty.
    expect(counts).toEqual([3, 3, 3]);
  });

  it('an invocation with nothing to claim sends its sweep alone; work the sweep shows or frees is claimed', async () => {
    const shape = (text: string) => (/\bready as\b/.test(text) ? 'claim' : 'other');
    const invocation = async () => {
      const { result, texts } = await captureStatements(testDriver(), () => run([noop]));
      return { claimed: result.claimed, stoppedBecause: result.stoppedBecause, sent: texts.map(shape) };
    };
    // Nothing queued, then a job not due yet: the sweep says a claim would find nothing.
    const idle = { claimed: 0, stoppedBecause: 'drained', sent: ['other'] };
    expect(await invocation()).toEqual(idle);
    await q.enqueue(t.db, noop, { n: 1 }, { delayMs: 60_000 });
    expect(await invocation()).toEqual(idle);
    // A due job.
    await q.enqueue(t.db, noop, { n: 2 });
    expect(await invocation()).toMatchObject({ claimed: 1, sent: ['other', 'claim', 'claim'] });
    // A lease that ran out with attempts left: the claim rescues it.
    const [lapsed] = await q.enqueueMany(t.db, [noop.with({ n: 3 })]);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'running', attempt = 1, lease_token = gen_random_uuid(),
        lease_expires_at = now() - interval '1 minute', locked_by = 'gone', started_at = now(), attempted_at = now()
       where id = $1`,
      [lapsed?.id],
    );
    expect(await invocation()).toMatchObject({ claimed: 1 });
    // A parked follower whose release was missed (its predecessor ended without releasing it): the
    // sweep releases it, its own snapshot cannot see that, and the claim that follows takes it.
    const [head, follower] = await q.enqueueMany(t.db, [
      noop.with({ n: 4 }, { orderingKey: 'k' }),
      noop.with({ n: 5 }, { orderingKey: 'k' }),
    ]);
    await t.admin.query(`update "${t.schema}".jobs set run_at = 'infinity' where id = $1`, [follower?.id]);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'completed', attempt = 1, started_at = now(), attempted_at = now(),
        finished_at = now() where id = $1`,
      [head?.id],
    );
    expect(await invocation()).toMatchObject({ claimed: 1 });
    expect(await job(follower?.id as string)).toMatchObject({ state: 'completed' });
    expect(await invocation()).toEqual(idle);
  });

  it('the sweep leaves out the ordering releases until a job with an ordering key is unfinished; then the full sweep follows', async () => {
    const sweeps = (texts: string[]) =>
      texts
        .filter((text) => /\bby_deadline as\b/.test(text))
        .map((text) => (/\bparked_heads\b/.test(text) ? 'full' : 'plain'));
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [noop], logger: silentLogger });
    const invocation = async () => {
      const { result, texts } = await captureStatements(testDriver(), () =>
        worker.runInvocation({ remainingMs: 60_000 }),
      );
      return { claimed: result.claimed, sweeps: sweeps(texts) };
    };
    await enqueueNoops(2);
    expect(await invocation()).toEqual({ claimed: 2, sweeps: ['plain'] });
    // A parked follower whose release was missed: the plain sweep sees it, the full one releases it
    // at once, and this warm worker sends the full sweep while a job with a key is unfinished.
    const [head, follower] = await q.enqueueMany(t.db, [
      noop.with({ n: 4 }, { orderingKey: 'k' }),
      noop.with({ n: 5 }, { orderingKey: 'k' }),
    ]);
    await t.admin.query(`update "${t.schema}".jobs set run_at = 'infinity' where id = $1`, [follower?.id]);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'completed', attempt = 1, started_at = now(), attempted_at = now(),
        finished_at = now() where id = $1`,
      [head?.id],
    );
    expect(await invocation()).toEqual({ claimed: 1, sweeps: ['plain', 'full'] });
    expect(await job(follower?.id as string)).toMatchObject({ state: 'completed' });
    // Every job with a key finished: the next full sweep says so, and the one after is plain again.
    expect(await invocation()).toEqual({ claimed: 0, sweeps: ['full'] });
    expect(await invocation()).toEqual({ claimed: 0, sweeps: ['plain'] });
    // A doomed job with a key (past its deadline) is left to the full sweep, which buries it.
    const [late] = await q.enqueueMany(t.db, [noop.with({ n: 6 }, { orderingKey: 'k2' })]);
    await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 minute' where id = $1`, [
      late?.id,
    ]);
    expect(await invocation()).toEqual({ claimed: 0, sweeps: ['plain', 'full'] });
    expect(await job(late?.id as string)).toMatchObject({ state: 'dead', dead_reason: 'deadline_exceeded' });
  });

  it('more than 128 outcomes are written by their own statement, beside the next claim', async () => {
    await enqueueNoops(300);
    const { result, texts } = await captureStatements(testDriver(), () =>
      run([noop], { concurrency: 300, batchSize: 300 }),
    );
    expect(result).toMatchObject({ claimed: 300, completed: 300, stoppedBecause: 'drained' });
    const shape = (text: string) =>
      // Every claim carries a settle (empty when nothing rides along): the claim, or a settle alone.
      /\bready as\b/.test(text) ? 'claim' : /\bsettle_input as\b/.test(text) ? 'settle' : 'other';
    expect(texts).toHaveLength(4);
    expect(texts.slice(0, 2).map(shape)).toEqual(['other', 'claim']);
    expect(texts.slice(2).map(shape).sort()).toEqual(['claim', 'settle']);
    expect(await states()).toEqual([{ state: 'completed', n: 300 }]);
  });

  it('a settle the database refuses, beside a claim that succeeds: the error is reported, the claimed jobs given back', async () => {
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
        Array.from({ length: 150 }, () => noop.with({ n: -1 })),
      );
      await enqueueNoops(50);
      const summary = await run([noop], { concurrency: 150, batchSize: 150 });
      expect(summary).toMatchObject({ claimed: 200, completed: 0, released: 50, stoppedBecause: 'error' });
      expect(summary.error).toMatch(/completion refused/);
      const { rows } = await t.admin.query(
        `select state, attempt, (lease_expires_at is null) as no_lease, count(*)::int as n
         from "${t.schema}".jobs group by 1, 2, 3 order by 1`,
      );
      expect(rows).toEqual([
        { state: 'queued', attempt: 0, no_lease: true, n: 50 },
        { state: 'running', attempt: 1, no_lease: false, n: 150 },
      ]);
    } finally {
      await t.admin.query(`drop function "${t.schema}".refuse_completion() cascade`);
    }
  });
});

describe(`the invocation's deadline (${testDriver()})`, () => {
  it('a statement still blocked at the deadline is not waited for: the invocation returns in time, and the outcome it carried is not lost', async () => {
    const clock = new ManualClock();
    const locker = await t.admin.connect();
    try {
      // The handler locks its own row from another session, so the statement that writes its
      // outcome waits on the lock (as it would behind a stuck migration or a slow database).
      const definition = defineJob({
        kind: 'locks-itself',
        payload,
        timeoutMs: 1_000,
        handler: async (_payload, ctx) => {
          await locker.query('begin');
          await locker.query(`select 1 from "${t.schema}".jobs where id = $1 for update`, [ctx.id]);
        },
      });
      const { id } = await q.enqueue(t.db, definition, { n: 1 });
      // The outcome's statement, as the server sees it: waiting on the lock, or still running.
      // This schema's only: the other drivers' runs of this test share the server.
      const waitingOutcome = async (): Promise<number | undefined> => {
        const { rows } = await t.admin.query(
          `select pid from pg_stat_activity
           where state = 'active' and query like '%settle_input as%' and strpos(query, $1) > 0
             and wait_event_type = 'Lock'`,
          [`"${t.schema}".jobs`],
        );
        return rows[0]?.pid;
      };
      // Its session, until it is idle: on pg the statement runs in a transaction of its own
      // (db/drivers/pg-pool.ts), whose COMMIT follows it.
      const busy = async (pid: number) => {
        const { rows } = await t.admin.query(`select state from pg_stat_activity where pid = $1`, [pid]);
        return rows.length > 0 && rows[0].state !== 'idle';
      };
      let outcomePid: number | undefined;
      const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
      let advanced = false;
      const { result: summary } = await captureStatements(
        testDriver(),
        () =>
          createWorker({
            db: t.db,
            schema: t.schema,
            jobs: [definition],
            logger: silentLogger,
            clock,
            leaseGraceMs: 1_000,
            safetyMarginMs: 500,
          }).runInvocation({ remainingMs: 5_000 }),
        (text) => {
          if (advanced || !text.includes('settle_input as')) return;
          advanced = true;
          // Once the statement is queued on the lock, time runs out: 5 s pass on the invocation's clock.
          void (async () => {
            while (outcomePid === undefined) {
              outcomePid = await waitingOutcome();
              if (outcomePid === undefined) await nextTurn();
            }
            clock.advance(5_000);
          })();
        },
      );
      expect(summary).toMatchObject({
        claimed: 1,
        completed: 0,
        stoppedBecause: 'error',
        errorCode: 'invocation_deadline',
      });
      expect(summary.error).toMatch(/deadline/);
      expect((await job(id)).state).toBe('running');
      await locker.query('rollback');
      // The abandoned statement goes on once the lock is free, and completes the job.
      while (await busy(outcomePid as number)) await nextTurn();
      expect((await job(id)).state).toBe('completed');
    } finally {
      await locker.query('rollback').catch(() => {});
      locker.release();
    }
  });
});

describe(`a schema older than the code (${testDriver()})`, () => {
  it('the worker stops with schema_outdated, from the SQLSTATE the driver reports, naming what is missing; the job keeps its attempts', async () => {
    const { id } = await q.enqueue(t.db, noop, { n: 1 });
    // As if new code ran before its migration: a column the claim reads is not there.
    await t.admin.query(`alter table "${t.schema}".jobs rename column lease_token to lease_token_gone`);
    try {
      const summary = await run([noop]);
      expect(summary).toMatchObject({ stoppedBecause: 'error', errorCode: 'schema_outdated', claimed: 0 });
      expect(summary.error).toMatch(/older than this code \(column .*lease_token.* does not exist\)/);
    } finally {
      await t.admin.query(`alter table "${t.schema}".jobs rename column lease_token_gone to lease_token`);
    }
    expect(await job(id)).toMatchObject({ state: 'queued', attempt: 0 });
  });
});

describe(`transactional handlers (${testDriver()})`, () => {
  const sideEffects = async () => {
    await t.admin.query(`create table if not exists "${t.schema}".side_effects (n int)`);
    await t.admin.query(`truncate "${t.schema}".side_effects`);
  };
  const written = async () =>
    (await t.admin.query(`select n from "${t.schema}".side_effects order by n`)).rows.map((r) => r.n as number);
  const txTask = defineJob({
    kind: 'tx-task',
    payload,
    transactional: true,
    timeoutMs: 2_000,
    backoff: { type: 'constant', delayMs: 60_000 },
    handler: async (p, ctx) => {
      await ctx.tx.execute(sql`insert into ${sql.identifier(t.schema)}.side_effects (n) values (${p.n})`);
      if (p.n < 0) throw new Error('roll me back');
      return p.n * 10;
    },
  });

  if (testDriver() !== 'neon-http') {
    it("commits the handler's writes and result with the completion, and rolls them back on failure", async () => {
      await sideEffects();
      const [ok, failed] = await q.enqueueMany(t.db, [txTask.with({ n: 1 }), txTask.with({ n: -1 })]);
      expect(await run([txTask])).toMatchObject({ completed: 1, retried: 1 });
      expect(await written()).toEqual([1]);
      expect(await job(ok?.id as string)).toMatchObject({ state: 'completed', result: 10 });
      expect(await job(failed?.id as string)).toMatchObject({
        state: 'queued',
        last_error: expect.objectContaining({ message: 'roll me back' }),
      });
    });

    it("a transactional handler's signal fires at its timeout, and its writes roll back", async () => {
      await sideEffects();
      const clock = new ManualClock();
      let aborted: unknown;
      const slow = defineJob({
        kind: 'tx-slow',
        payload,
        transactional: true,
        timeoutMs: 200,
        backoff: { type: 'constant', delayMs: 60_000 },
        handler: async (p, ctx) => {
          await ctx.tx.execute(sql`insert into ${sql.identifier(t.schema)}.side_effects (n) values (${p.n})`);
          clock.advance(200); // the job's timeout passes on the invocation's clock
          aborted = ctx.signal.reason;
        },
      });
      const { id } = await q.enqueue(t.db, slow, { n: 1 });
      expect(await run([slow], { clock })).toMatchObject({ completed: 0, retried: 1 });
      expect((aborted as Error).message).toMatch(/timed out after 200 ms/);
      expect((await job(id)).last_error).toMatchObject({ class: 'timeout' });
      expect(await written()).toEqual([]);
    });

    it("completedJobs: 'delete' deletes the row in the handler's transaction, with its writes", async () => {
      await sideEffects();
      await q.enqueue(t.db, txTask, { n: 5 });
      expect(await run([txTask], { completedJobs: 'delete' })).toMatchObject({ completed: 1 });
      expect(await written()).toEqual([5]);
      expect(await states()).toEqual([]);
      const counted = await t.admin.query(`select sum(completed)::int as n from "${t.schema}".completed_counts`);
      expect(counted.rows[0].n).toBe(1);
    });
  } else {
    // neon-http sends each statement as its own HTTP request: there is no transaction to hand a
    // handler. The worker refuses the kind when it is built, before it claims anything.
    it('createWorker refuses a transactional kind with a ConfigError that says why, in either completion mode; its job stays queued', async () => {
      const { id } = await q.enqueue(t.db, txTask, { n: 1 });
      for (const completedJobs of ['keep', 'delete'] as const) {
        const build = () =>
          createWorker({ db: t.db, schema: t.schema, jobs: [txTask], logger: silentLogger, completedJobs });
        expect(build).toThrow(ConfigError);
        expect(build).toThrow(
          'job kind tx-task is transactional, but the neon-http driver has no interactive transactions; use pg or neon-ws',
        );
      }
      expect(await job(id)).toMatchObject({ state: 'queued', attempt: 0 });
    });
  }
});
