import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OutcomeUnknownError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { replay } from '../../core/replay.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { testDriver } from '../helpers/db.js';
import { type FaultyContext, useFaultySchema } from '../helpers/faulty.js';

// Durable steps, sleeps, signals and replay when an answer is lost, on each driver: a step whose
// result committed never runs again, a sleep is kept, a signal sent again with its id is stored once,
// a replay sent again replays nothing twice.
let t: FaultyContext;
useFaultySchema('drivers-faults-steps', (ctx) => {
  t = ctx;
});

const effects: string[] = [];
const payload = z.object({ n: z.number() });
const stepped = defineJob({
  kind: 'stepped',
  payload,
  timeoutMs: 3_000,
  backoff: { type: 'constant', delayMs: 0 },
  handler: async (_p, ctx) => {
    const a = await ctx.step('a', () => {
      effects.push('a');
      return 1;
    });
    await ctx.step('b', () => {
      effects.push(`b${a}`);
      return 2;
    });
  },
});
const sleeper = defineJob({
  kind: 'sleeper',
  payload,
  timeoutMs: 3_000,
  backoff: { type: 'constant', delayMs: 0 },
  handler: async (_p, ctx) => {
    effects.push('before');
    await ctx.sleep('nap', 3_600_000);
    effects.push('after');
  },
});
const waiter = defineJob({
  kind: 'waiter',
  payload,
  timeoutMs: 3_000,
  handler: async (_p, ctx) => {
    const got = await ctx.waitForSignal<{ v: number }>('go', { key: 'order-1', timeoutMs: 3_600_000 });
    effects.push(got.timedOut ? 'timed-out' : `signal:${got.payload.v}`);
  },
});
const failing = defineJob({
  kind: 'failing',
  payload,
  timeoutMs: 2_000,
  maxAttempts: 1,
  handler: () => {
    throw new Error('no');
  },
});
const q = () => createEnqueuer({ schema: t.schema });
const run = (options: Partial<WorkerOptions> = {}) =>
  createWorker({
    db: t.db,
    schema: t.schema,
    jobs: [stepped, sleeper, waiter, failing],
    logger: silentLogger,
    ...options,
  }).runInvocation({ remainingMs: 30_000 });
const jobRow = async (id: string) =>
  (
    await t.admin.query(
      `select state, attempt, run_at > now() + interval '30 minutes' as asleep from "${t.schema}".jobs where id = $1`,
      [id],
    )
  ).rows[0];

describe(`durable work when an answer is lost (${testDriver()})`, () => {
  it('a step whose record committed but whose answer was lost never runs again', async () => {
    effects.length = 0;
    const { id } = await q().enqueue(t.db, stepped, { n: 1 });
    // recordStep locks the job's row FOR SHARE: lose the answer of the first step's record.
    t.faults.inject({ mode: 'lose-answer', match: 'for share' });
    for (let i = 0; i < 4 && (await jobRow(id)).state !== 'completed'; i++) await run();
    expect(t.faults.armed).toBe(0); // the fault fired
    expect(await jobRow(id)).toMatchObject({ state: 'completed' });
    expect(effects).toEqual(['a', 'b1']);
  });

  it('a sleep whose answer was lost is kept: the job sleeps, and does not run again meanwhile', async () => {
    effects.length = 0;
    const { id } = await q().enqueue(t.db, sleeper, { n: 1 });
    // suspendJob's update (a wait's and a release's take the attempt back too, without greatest()).
    t.faults.inject({ mode: 'lose-answer', match: /attempt = j\.attempt - 1,\s+run_at = greatest\(/ });
    const first = await run();
    expect(t.faults.armed).toBe(0);
    expect(first).toMatchObject({ claimed: 1 }); // the fault met the sleep, not an earlier statement
    await run();
    expect(await jobRow(id)).toMatchObject({ state: 'queued', asleep: true });
    expect(effects).toEqual(['before']);
  });

  it('a signal sent again with its id after a lost answer is stored once and taken once', async () => {
    effects.length = 0;
    const { id } = await q().enqueue(t.db, waiter, { n: 1 });
    await run(); // reaches the wait and goes back to the queue
    t.faults.inject({ mode: 'lose-answer', match: 'insert into' });
    const send = () => q().signal(t.db, 'order-1', { v: 7 }, { id: 'webhook-evt-1' });
    await expect(send()).rejects.toBeInstanceOf(OutcomeUnknownError);
    const again = await send();
    expect(again.deduplicated).toBe(true);
    const stored = await t.admin.query(`select id::text as id from "${t.schema}".signals`);
    expect(stored.rows).toEqual([{ id: again.id }]);
    await run();
    expect(await jobRow(id)).toMatchObject({ state: 'completed' });
    expect(effects).toEqual(['signal:7']);
  });

  it('a replay sent again after a lost answer replays each job once', async () => {
    const { id } = await q().enqueue(t.db, failing, { n: 1 });
    await run();
    expect(await jobRow(id)).toMatchObject({ state: 'dead' });
    t.faults.inject({ mode: 'lose-answer', match: 'replay' });
    const options = { schema: t.schema, ids: [id], by: 'ops' };
    await expect(replay(t.db, options)).rejects.toBeInstanceOf(OutcomeUnknownError);
    const again = await replay(t.db, options);
    expect(again).toMatchObject({ replayed: [], refused: [{ id, state: 'queued' }] });
    const rows = await t.admin.query(`select state, replay_count from "${t.schema}".jobs`);
    expect(rows.rows).toEqual([{ state: 'queued', replay_count: 1 }]);
  });

  it('an attempt whose time ran out while it read its steps does not start a step when the answer comes', async () => {
    const ran: string[] = [];
    let handlerDone: () => void = () => {};
    const handlerEnded = new Promise<void>((resolve) => {
      handlerDone = resolve;
    });
    const quick = defineJob({
      kind: 'quick-stepped',
      payload,
      timeoutMs: 300,
      handler: async (_p, ctx) => {
        try {
          await ctx.step('only', () => void ran.push(`attempt ${ctx.attempt}`));
        } finally {
          handlerDone();
        }
      },
    });
    await q().enqueue(t.db, quick, { n: 1 });
    // The first step's read (which also pushes the lease) answers after the attempt's 300 ms: the
    // watchdog ends the attempt first (its retry waits for the lease), and when the answer comes the
    // abandoned handler must not run the step — a later holder may already have.
    t.faults.inject({ mode: 'slow', match: 'with extended as (', delayMs: 450 });
    const first = await createWorker({ db: t.db, schema: t.schema, jobs: [quick], logger: silentLogger }).runInvocation(
      {
        remainingMs: 30_000,
      },
    );
    expect(first).toMatchObject({ claimed: 1, retried: 1 });
    expect(t.faults.armed).toBe(0);
    await handlerEnded; // once the read's answer came, the handler went on (or stopped)
    expect(ran).toEqual([]);
  });
});
