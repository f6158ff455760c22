import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-linger', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

/** A worker on a manual clock whose `lingering` log lines can be awaited, one after another. */
function lingeringWorker(options: Partial<WorkerOptions>) {
  const clock = new SteppingClock();
  const ran: number[] = [];
  const noop = defineJob({
    kind: 'noop',
    payload: z.object({ n: z.number() }),
    timeoutMs: 1_000,
    handler: ({ n }) => void ran.push(n),
  });
  const waiters: (() => void)[] = [];
  let lingered = 0;
  const worker = createWorker({
    db: t.db,
    schema: t.schema,
    jobs: [noop],
    clock,
    logger: {
      ...silentLogger,
      info: (message: string) => {
        if (message !== 'lingering') return;
        lingered++;
        waiters.shift()?.();
      },
    },
    ...options,
  });
  const nextLinger = () => new Promise<void>((resolve) => waiters.push(resolve));
  return { clock, ran, noop, worker, nextLinger, lingered: () => lingered };
}

const state = async () =>
  (await t.admin.query(`select state, count(*)::int as n from "${t.schema}".jobs group by state order by state`)).rows;

/** A manual clock that says when a timer is set, so a test can move it exactly to that timer. */
class SteppingClock extends ManualClock {
  #listener: ((ms: number) => void) | undefined;

  override setTimer(fn: () => void, ms: number): () => void {
    const cancel = super.setTimer(fn, ms);
    this.#listener?.(ms);
    return cancel;
  }

  /** Resolves with the delay of the next timer set for at most `maxMs` (longer ones are deadlines). */
  nextTimer(maxMs: number): Promise<number> {
    return new Promise((resolve) => {
      this.#listener = (ms) => {
        if (ms > maxMs) return;
        this.#listener = undefined;
        resolve(ms);
      };
    });
  }
}

/**
 * Moves the clock `pollMs` (the wait of a lingering invocation), then to each look it sets next —
 * timers of at most `pollMs`; the statements' deadline timers are longer — until it returns.
 */
async function stepUntil(clock: SteppingClock, done: Promise<unknown>, pollMs: number): Promise<void> {
  const finished = Symbol('finished');
  const ended = done.then(() => finished);
  let next = clock.nextTimer(pollMs); // listening before the clock moves: the reaction comes after
  clock.advance(pollMs);
  while (true) {
    const ms = await Promise.race([next, ended]);
    if (typeof ms !== 'number') return;
    next = clock.nextTimer(pollMs);
    clock.advance(ms);
  }
}

describe(`linger (${testDriver()})`, () => {
  it('a job enqueued while the invocation lingers runs in it, with no nudge and no tick; then it returns', async () => {
    const w = lingeringWorker({ lingerMs: 1_000, lingerPollMs: 250 });
    await q.enqueue(t.db, w.noop, { n: 1 });
    const firstLinger = w.nextLinger();
    const run = w.worker.runInvocation({ remainingMs: 60_000 });
    await firstLinger;
    // The first job's outcome was written before the wait, not held back by it.
    expect(await state()).toEqual([{ state: 'completed', n: 1 }]);
    await q.enqueue(t.db, w.noop, { n: 2 });
    const secondLinger = w.nextLinger();
    w.clock.advance(250);
    await secondLinger;
    expect(w.ran).toEqual([1, 2]);
    expect(await state()).toEqual([{ state: 'completed', n: 2 }]);
    const start = w.clock.now();
    await stepUntil(w.clock, run, 250);
    const summary = await run;
    expect(summary).toMatchObject({ claimed: 2, completed: 2, stoppedBecause: 'drained' });
    // It gave up exactly when lingerMs had passed with nothing found.
    expect(w.clock.now() - start).toBe(1_000);
    expect(w.lingered()).toBe(2);
  });

  it('never lingers past the time to stop claiming', async () => {
    const w = lingeringWorker({ lingerMs: 600_000, lingerPollMs: 250, safetyMarginMs: 1_000 });
    await q.enqueue(t.db, w.noop, { n: 1 });
    const linger = w.nextLinger();
    const start = w.clock.now();
    const run = w.worker.runInvocation({ remainingMs: 3_000 });
    await linger;
    await stepUntil(w.clock, run, 250);
    expect(await run).toMatchObject({ completed: 1, stoppedBecause: 'deadline' });
    // The budget was 3 s with 1 s kept for the last writes; a 1 s job fits until 1 s in: it looked
    // then, and stopped at the next look (1.25 s), not at lingerMs.
    expect(w.clock.now() - start).toBe(1_250);
  });

  it('lingerMs 0 (the default) returns as soon as the queue is dry', async () => {
    const w = lingeringWorker({});
    await q.enqueue(t.db, w.noop, { n: 1 });
    expect(await w.worker.runInvocation({ remainingMs: 60_000 })).toMatchObject({
      completed: 1,
      stoppedBecause: 'drained',
    });
    expect(w.lingered()).toBe(0);
  });

  it('refuses a linger or poll interval out of range', () => {
    const noop = defineJob({ kind: 'noop', payload: z.object({}), handler: () => {} });
    const make = (options: Partial<WorkerOptions>) => () =>
      createWorker({ db: t.db, schema: t.schema, jobs: [noop], ...options });
    expect(make({ lingerMs: -1 })).toThrow(ConfigError);
    expect(make({ lingerMs: 900_001 })).toThrow('lingerMs must be from 0 to 900000');
    expect(make({ lingerPollMs: 5 })).toThrow('lingerPollMs must be from 10 to 60000');
  });
});
