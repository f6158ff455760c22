import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';

let t: TestContext;
useTestSchema('core-refill', (ctx) => {
  t = ctx;
});

const nextTurns = async (turns: number) => {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe(`claiming a backlog of jobs that end one by one (${testDriver()})`, () => {
  it('claims when half a batch is free, not a statement per freed slot, and every job runs', async () => {
    // Each job runs until the test ends it; the test ends them one at a time, oldest first, as
    // jobs of different durations would end. The invocation's clock does not move, so a freed
    // slot never waits long enough (flushIntervalMs) to be claimed on its own.
    const clock = new ManualClock();
    const running: (() => void)[] = [];
    let started!: () => void;
    let nextStart = new Promise<void>((resolve) => {
      started = resolve;
    });
    const held = defineJob({
      kind: 'held',
      payload: z.object({ n: z.number() }),
      timeoutMs: 60_000,
      handler: () =>
        new Promise<void>((resolve) => {
          running.push(resolve);
          started();
          nextStart = new Promise<void>((r) => {
            started = r;
          });
        }),
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 60 }, (_, n) => held.with({ n })),
    );
    let done = false;
    const run = captureStatements(testDriver(), () =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [held],
        logger: silentLogger,
        clock,
        concurrency: 10,
      }).runInvocation({ remainingMs: 600_000 }),
    ).finally(() => {
      done = true;
    });
    for (let step = 0; step < 2_000 && !done; step++) {
      // End the oldest job; then either a claim starts new ones, or the loop settles with a free slot.
      const end = running.shift();
      if (end) {
        end();
        await Promise.race([nextStart, nextTurns(300)]);
      } else {
        await Promise.race([nextStart, run]); // nothing running: wait for a claim to start some, or the end
      }
    }
    const { result: summary, texts } = await run;
    expect(summary).toMatchObject({ claimed: 60, completed: 60, released: 0 });
    const claims = texts.filter((text) => text.includes('for update skip locked') && text.includes('claimed as'));
    // A claim per freed slot would be ~50; half a batch (5) at a time is about a dozen.
    expect(claims.length).toBeLessThanOrEqual(15);
  });

  it("a freed slot waits for companions at most flushIntervalMs of the invocation's clock", async () => {
    const clock = new ManualClock();
    const running: (() => void)[] = [];
    let starts = 0;
    const held = defineJob({
      kind: 'held',
      payload: z.object({ n: z.number() }),
      timeoutMs: 60_000,
      handler: () =>
        new Promise<void>((resolve) => {
          starts++;
          running.push(resolve);
        }),
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 30 }, (_, n) => held.with({ n })),
    );
    const run = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [held],
      logger: silentLogger,
      clock,
      concurrency: 10,
      flushIntervalMs: 200,
    }).runInvocation({ remainingMs: 600_000 });
    while (starts < 10) await nextTurns(10);
    running.shift()?.(); // one slot free: not half a batch
    await nextTurns(300);
    expect(starts).toBe(10);
    clock.advance(200); // it has waited flushIntervalMs: the slot is filled
    // The claim that fills it is a round trip to Postgres: wait for it, however busy the machine (a
    // bound of 10,000 event-loop turns ran out under CI's three test files at once).
    await vi.waitFor(() => expect(starts).toBe(11), { timeout: 30_000, interval: 5 });
    // Let the rest run to the end.
    let finished = false;
    void run.then(() => {
      finished = true;
    });
    while (!finished) {
      for (const end of running.splice(0)) end();
      await nextTurns(5);
    }
    expect(await run).toMatchObject({ claimed: 30, completed: 30 });
  });
});
