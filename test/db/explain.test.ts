import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pause, setLimit } from '../../core/controls.js';
import { explain, type JobHold } from '../../core/explain.js';
import { defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { setRateLimit } from '../../core/rate-limits.js';
import { createWorker } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

// "Why isn't my job running?" — explain() names each hold with its evidence, on every driver.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('db-explain', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const payload = z.object({ n: z.number().default(0) });
const task = defineJob({ kind: 'task', queue: 'work', payload, handler: () => {} });
const reasons = (holds: JobHold[] | undefined) => (holds ?? []).map((h) => h.reason);
const why = async (id: string, options: Parameters<typeof explain>[2] = {}) =>
  (await explain(t.db, id, { schema: t.schema, ...options })) as NonNullable<Awaited<ReturnType<typeof explain>>>;
const enqueue = async (options: Parameters<typeof task.with>[1] = {}, kind = task) =>
  (await q.enqueueMany(t.db, [kind.with({}, options)]))[0]?.id as string;

describe(`explain: why a job does not run (${testDriver()})`, () => {
  it('a ready job says so, and how many ready jobs of its queue are ahead of it', async () => {
    await enqueue();
    await enqueue();
    const third = await enqueue();
    const e = await why(third);
    expect(e).toMatchObject({ ready: true, readyAhead: 2, holds: [], state: 'queued' });
    expect(e.summary).toBe(`job ${third} is ready: 2 ready job(s) of queue work are ahead of it`);
    expect(await explain(t.db, '999999', { schema: t.schema })).toBeNull();
  });

  it('readyAhead leaves out the jobs of a paused kind, which explain calls not ready', async () => {
    const hook = defineJob({ kind: 'hook', queue: 'work', payload, handler: () => {} });
    const held = await enqueue({}, hook);
    await enqueue();
    const mine = await enqueue();
    await pause(t.db, { kind: 'hook' }, { schema: t.schema, by: 'ops' });
    expect(await why(held)).toMatchObject({ ready: false, readyAhead: null });
    const e = await why(mine);
    expect(e).toMatchObject({ ready: true, readyAhead: 1 });
    expect(e.summary).toBe(`job ${mine} is ready: 1 ready job(s) of queue work are ahead of it`);
  });

  it('scheduled, paused, and a queue at its concurrency limit declared in code', async () => {
    const later = await enqueue({ delayMs: 3_600_000 });
    expect(reasons((await why(later)).holds)).toEqual(['scheduled']);
    const id = await enqueue();
    await pause(t.db, { queue: 'work' }, { schema: t.schema, by: 'ops', reason: 'deploy' });
    const paused = await why(id);
    expect(reasons(paused.holds)).toEqual(['paused']);
    expect(paused.holds[0]?.message).toMatch(/queue work is paused since .* by ops \(deploy\)/);
    // A running job of the queue fills a limit of 1 that only the code declares.
    const limited = defineJob({ kind: 'task', queue: defineQueue({ name: 'work', concurrency: 1 }), payload });
    await t.admin.query(`delete from "${t.schema}".pauses`);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'running', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute', locked_by = 'inv-1', attempt = 1
       where id = (select min(id) from "${t.schema}".jobs where state = 'queued' and run_at <= now())`,
    );
    const other = await enqueue();
    expect(reasons((await why(other)).holds)).toEqual([]);
    const held = await why(other, { jobs: [limited] });
    expect(reasons(held.holds)).toEqual(['concurrency_limit']);
    expect(held.holds[0]?.message).toBe('queue work is at its concurrency limit: 1 running of 1');
  });

  it('a running job, a job waiting for its parent, and one behind another of its ordering key', async () => {
    const parent = await enqueue();
    const child = await enqueue({ after: [parent] });
    const first = await enqueue({ orderingKey: 'order-7' });
    const second = await enqueue({ orderingKey: 'order-7' });
    expect(reasons((await why(child)).holds)).toEqual(['parents']);
    expect((await why(child)).holds[0]?.message).toBe(`it waits for job ${parent} (queued) to complete`);
    const behind = await why(second);
    expect(reasons(behind.holds)).toEqual(['ordering_key']);
    expect(behind.holds[0]?.message).toContain(`job ${first} (queued) holds its ordering key "order-7"`);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'running', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute', locked_by = 'inv-9', attempt = 1 where id = $1`,
      [parent],
    );
    expect(reasons((await why(parent)).holds)).toEqual(['running']);
    expect((await why(parent)).holds[0]?.message).toMatch(/running: attempt 1 of 25, held by inv-9 until/);
    expect(reasons((await why(parent, { now: new Date(Date.now() + 120_000) })).holds)).toEqual(['lease_expired']);
  });

  it('a rate used up, with when its next token comes, and a destination whose breaker is open', async () => {
    await setRateLimit(t.db, { queue: 'work' }, { limit: 1, periodMs: 60_000 }, { schema: t.schema, by: 'ops' });
    await enqueue();
    const waiting = await enqueue();
    const hook = defineJob({ kind: 'hook', payload, destination: () => 'partner.example', handler: () => {} });
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [task, hook],
      logger: silentLogger,
      rateWaitMs: 0,
    });
    expect(await worker.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 1 });
    const rated = await why(waiting);
    expect(reasons(rated.holds)).toEqual(['rate_limit']);
    expect(rated.holds[0]?.until).toBeInstanceOf(Date);
    const id = await enqueue({}, hook);
    await t.admin.query(
      `insert into "${t.schema}".destinations (name, state, opened_at, open_until) values ('partner.example', 'open', now(), now() + interval '5 minutes')`,
    );
    const open = await why(id);
    expect(reasons(open.holds)).toEqual(['breaker_open']);
    expect(open.holds[0]?.message).toMatch(/circuit breaker of partner\.example is open until/);
    // Closed, but the partner asked to wait (a Retry-After for the whole destination).
    await t.admin.query(
      `update "${t.schema}".destinations set state = 'closed', opened_at = null, open_until = null,
         deferred_until = now() + interval '2 minutes' where name = 'partner.example'`,
    );
    const deferred = await why(id);
    expect(reasons(deferred.holds)).toEqual(['destination_deferred']);
    expect(deferred.holds[0]?.until).toBeInstanceOf(Date);
  });

  it('a dead job says it is finished and how to run it again; a job no worker serves says so', async () => {
    const hopeless = defineJob({
      kind: 'hopeless',
      queue: 'work',
      payload,
      maxAttempts: 1,
      handler: () => {
        throw new Error('no');
      },
    });
    const dead = await enqueue({}, hopeless);
    await createWorker({ db: t.db, schema: t.schema, jobs: [hopeless], logger: silentLogger }).runInvocation({
      remainingMs: 60_000,
    });
    const e = await why(dead);
    expect(reasons(e.holds)).toEqual(['finished']);
    expect(e.holds[0]?.message).toContain('dead (max_attempts): replay it to run it again');
    // A worker that serves only 'other' recorded itself; this queue has no worker.
    const other = defineJob({ kind: 'other', queue: 'other', payload, handler: () => {} });
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [other],
      queues: ['other'],
      logger: silentLogger,
    }).runInvocation({
      remainingMs: 60_000,
    });
    const orphan = await enqueue();
    expect(reasons((await why(orphan)).holds)).toEqual(['no_worker']);
  });
  it('a job whose kind fits no invocation of the workers that serve it says so, and what to do', async () => {
    const slow = defineJob({ kind: 'slow', queue: 'work', payload, timeoutMs: 30_000, handler: () => {} });
    const id = await enqueue({}, slow);
    const short = (name: string, remainingMs: number) =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [slow, task],
        name,
        logger: silentLogger,
        clock: new ManualClock(),
      }).runInvocation({ remainingMs });
    await short('short', 15_000);
    await short('shorter', 10_000);
    const e = await why(id);
    expect(reasons(e.holds)).toEqual(['no_worker_fits']);
    expect(e.holds[0]?.message).toBe(
      "no invocation of the workers that serve queue work fits kind slow's timeoutMs: the longest has 14000 ms for attempts (the function's time less safetyMarginMs); raise the function's timeout or lower the kind's timeoutMs",
    );
    // Given the kinds, it names the timeout too.
    expect((await why(id, { jobs: [slow] })).holds[0]?.message).toContain("fits kind slow's timeoutMs (30000 ms)");
    // One worker whose invocations fit it is enough.
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [slow],
      name: 'long',
      logger: silentLogger,
      drain: false,
    }).runInvocation({ remainingMs: 60_000 });
    const next = await enqueue({}, slow);
    expect(await why(next)).toMatchObject({ ready: true, holds: [] });
  });

  it('sleeping, waiting for a signal, retry-waiting, past its deadline, and outside its run window', async () => {
    const sleeper = defineJob({
      kind: 'sleeper',
      queue: 'work',
      payload,
      handler: async (p, ctx) => {
        if (p.n === 1) await ctx.sleep('nap', 3_600_000);
        else await ctx.waitForSignal('go', { key: 'go:2', timeoutMs: 3_600_000 });
      },
    });
    let thrown = false;
    const flaky = defineJob({
      kind: 'flaky',
      queue: 'work',
      payload,
      handler: () => {
        if (!thrown) {
          thrown = true;
          throw new Error('once');
        }
      },
    });
    const [napping, waiting] = await q.enqueueMany(t.db, [sleeper.with({ n: 1 }), sleeper.with({ n: 2 })]);
    const retrying = await enqueue({}, flaky);
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [sleeper, flaky, task],
      logger: silentLogger,
    }).runInvocation({
      remainingMs: 60_000,
    });
    expect(reasons((await why(napping?.id as string)).holds)).toEqual(['sleeping']);
    const signal = await why(waiting?.id as string);
    expect(reasons(signal.holds)).toEqual(['waiting_for_signal']);
    expect(signal.holds[0]?.message).toContain('the signal "go:2" (step go)');
    expect(reasons((await why(retrying)).holds)).toEqual(['retry_waiting']);
    const late = await enqueue({ deadline: new Date(Date.now() + 60_000) });
    expect(reasons((await why(late, { now: new Date(Date.now() + 120_000) })).holds)).toEqual(['deadline_passed']);
    // A window of one minute that starts an hour from now: shut now.
    const inAnHour = new Date(Date.now() + 3_600_000);
    const hhmm = (d: Date) =>
      `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
    const windowed = defineJob({
      kind: 'task',
      queue: 'work',
      payload,
      runWindow: { start: hhmm(inAnHour), end: hhmm(new Date(inAnHour.getTime() + 60_000)) },
    });
    const shut = await enqueue();
    const outside = await why(shut, { jobs: [windowed] });
    expect(reasons(outside.holds)).toEqual(['run_window']);
    // It opens at the window's start: the first minute, on the database's clock, at that wall time.
    const opens = new Date(Math.floor(inAnHour.getTime() / 60_000) * 60_000);
    expect(outside.holds[0]?.until).toEqual(opens);
    expect(outside.holds[0]?.message).toBe(
      `the run window of its kind task is shut now; it opens at ${opens.toISOString()}`,
    );
  });

  it('a run window that starts inside a DST gap opens when the clocks jump past its start', async () => {
    // New York, 14 March 2027: 02:00 EST jumps to 03:00 EDT (07:00 UTC). A window from 02:30 to
    // 04:00 is shut at midnight and opens at the jump, when the wall clock reads 03:00.
    const nightly = defineJob({
      kind: 'task',
      queue: 'work',
      payload,
      runWindow: { start: '02:30', end: '04:00', timezone: 'America/New_York' },
    });
    const id = await enqueue();
    const night = await why(id, { jobs: [nightly], now: new Date('2027-03-14T05:00:00Z') });
    expect(reasons(night.holds)).toEqual(['run_window']);
    expect(night.holds[0]?.until).toEqual(new Date('2027-03-14T07:00:00Z'));
    // Two days later the same window opens at 02:30 EDT (06:30 UTC); inside it, nothing holds the job.
    const later = await why(id, { jobs: [nightly], now: new Date('2027-03-16T05:00:00Z') });
    expect(later.holds[0]?.until).toEqual(new Date('2027-03-16T06:30:00Z'));
    expect(reasons((await why(id, { jobs: [nightly], now: new Date('2027-03-16T07:00:00Z') })).holds)).toEqual([]);
  });

  it('a paused kind, a limit set at run time in the table, and a half-open breaker', async () => {
    const hook = defineJob({
      kind: 'hook',
      queue: 'work',
      payload,
      destination: () => 'partner.example',
      handler: () => {},
    });
    const id = await enqueue({}, hook);
    await pause(t.db, { kind: 'hook' }, { schema: t.schema, by: 'ops' });
    const paused = await why(id);
    expect(reasons(paused.holds)).toEqual(['paused']);
    expect(paused.holds[0]?.message).toMatch(/^its kind hook is paused since .* by ops: resume it to go on$/);
    await t.admin.query(`delete from "${t.schema}".pauses`);
    // A limit of 1 on the kind, set at run time (no code declares it), filled by a running job.
    await setLimit(t.db, { kind: 'hook' }, 1, { schema: t.schema, by: 'ops' });
    const runner = await enqueue({}, hook);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'running', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute', locked_by = 'inv-3', attempt = 1 where id = $1`,
      [runner],
    );
    const limited = await why(id);
    expect(reasons(limited.holds)).toEqual(['concurrency_limit']);
    expect(limited.holds[0]?.message).toBe('kind hook is at its concurrency limit: 1 running of 1');
    await t.admin.query(`delete from "${t.schema}".limits`);
    // Half-open: the running job is the breaker's probe; the others wait for its outcome.
    await t.admin.query(
      `insert into "${t.schema}".destinations (name, state, opened_at, probe_job, probe_until)
       values ('partner.example', 'half_open', now(), $1, now() + interval '1 minute')`,
      [runner],
    );
    const probing = await why(id);
    expect(reasons(probing.holds)).toEqual(['breaker_open']);
    expect(probing.holds[0]?.message).toBe(
      'the circuit breaker of partner.example is half-open: one probe job runs first',
    );
  });
});
