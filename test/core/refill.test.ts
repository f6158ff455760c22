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

/** Ends every job that runs, again and again, until the invocation `run` returns; its summary. */
async function runToEnd<T>(run: Promise<T>, running: (() => void)[]): Promise<T> {
  let finished = false;
  void run.then(() => {
    finished = true;
  });
  while (!finished) {
    for (const end of running.splice(0)) end();
    await nextTurns(5);
  }
  return run;
}

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

  /**
   * `count` jobs that each run until the test ends them (`running`), an invocation of concurrency 10
   * and flushIntervalMs 200 on a manual clock, and `finish`: ends what runs until the invocation returns.
   */
  const heldBacklog = async (count: number) => {
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
      Array.from({ length: count }, (_, n) => held.with({ n })),
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
    const finish = () => runToEnd(run, running);
    return { clock, running, starts: () => starts, finish };
  };

  it("a freed slot waits for companions at most flushIntervalMs of the invocation's clock", async () => {
    const { clock, running, starts, finish } = await heldBacklog(30);
    while (starts() < 10) await nextTurns(10);
    running.shift()?.(); // one slot free: not half a batch
    await nextTurns(300);
    expect(starts()).toBe(10);
    clock.advance(200); // it has waited flushIntervalMs: the slot is filled
    // The claim that fills it is a round trip to Postgres: wait for it, however busy the machine (a
    // bound of 10,000 event-loop turns ran out under CI's three test files at once).
    await vi.waitFor(() => expect(starts()).toBe(11), { timeout: 30_000, interval: 5 });
    expect(await finish()).toMatchObject({ claimed: 30, completed: 30 });
  });

  it('leaves no timer behind for the slots a claim filled', async () => {
    // The timer that lets a freed slot wait at most flushIntervalMs belongs to the slots that came
    // free; once a claim fills them it would only wake the loop for nothing, once per batch.
    const { clock, running, starts, finish } = await heldBacklog(20);
    await vi.waitFor(() => expect(starts()).toBe(10), { timeout: 30_000, interval: 5 });
    await nextTurns(20);
    const whileFirstRuns = clock.pending; // the watchdog's
    for (const end of running.splice(0)) end(); // the whole batch ends: its slots are claimed at once
    await vi.waitFor(() => expect(starts()).toBe(20), { timeout: 30_000, interval: 5 });
    await nextTurns(20);
    expect(clock.pending).toBe(whileFirstRuns);
    expect(await finish()).toMatchObject({ claimed: 20, completed: 20 });
  });
});

/**
 * The test database behind a link whose every hot statement (the claim, the settle) moves `clock` on by
 * `roundTripMs` before its answer comes. `sent` is called as each one is sent; what it returns, with
 * the answer (the number of jobs a claim took, undefined for another statement).
 */
function slowLink(clock: ManualClock, roundTripMs: number, sent: () => (jobs: number | undefined) => void) {
  const { executor } = t.db;
  return {
    ...t.db,
    executor: {
      query: (statement: Parameters<typeof executor.query>[0]) => executor.query(statement),
      batch: (statements: Parameters<typeof executor.batch>[0]) => executor.batch(statements),
      transaction: executor.transaction,
      hot: async (statement: Parameters<typeof executor.hot>[0], hint: Parameters<typeof executor.hot>[1]) => {
        const answered = sent();
        const rows = await executor.hot(statement, hint);
        clock.advance(roundTripMs);
        // The claim's answer: its jobs column-wise, the first column their ids joined by commas.
        const row = rows[0] as { jobs?: [ids: string, ...unknown[]] | null } | undefined;
        answered(row && 'jobs' in row ? (row.jobs?.[0].split(',').length ?? 0) : undefined);
        return rows;
      },
    },
  };
}

/**
 * Over a slow link. The connection's executor moves the invocation's clock on by `roundTripMs` in every
 * hot statement (the claim and the settle), as a round trip to a database far away would; jobs hold
 * until the test ends them, after it moved the clock by their duration. Ten jobs start; after 100 ms
 * five end, and the other five are as old: they end before a claim sent now could be answered.
 */
describe(`claiming over a slow link (${testDriver()})`, () => {
  type Stand = {
    clock: ManualClock;
    running: (() => void)[];
    claimed: number[];
    starts: () => number;
    /** Hot statements other than claims sent so far (the sweep, settles of their own). */
    others: () => number;
  };
  const scenario = async (
    options: { roundTripMs: number; jobMs?: number; timeoutMs?: number; remainingMs?: number; destination?: boolean },
    more?: (stand: Stand) => Promise<void>,
  ) => {
    const clock = new ManualClock();
    const running: (() => void)[] = [];
    let starts = 0;
    const held = defineJob({
      kind: 'held',
      payload: z.object({ n: z.number() }),
      timeoutMs: options.timeoutMs ?? 60_000,
      ...(options.destination ? { destination: () => 'partner.example' } : {}),
      handler: () =>
        new Promise<void>((resolve) => {
          starts++;
          running.push(resolve);
        }),
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 40 }, (_, n) => held.with({ n })),
    );
    /** How many jobs each claim took, in order. */
    const claimed: number[] = [];
    let others = 0;
    const slow = slowLink(clock, options.roundTripMs, () => (jobs) => {
      if (jobs !== undefined) claimed.push(jobs);
      else others++;
    });
    const run = createWorker({
      db: slow,
      schema: t.schema,
      jobs: [held],
      logger: silentLogger,
      clock,
      concurrency: 10,
    }).runInvocation({ remainingMs: options.remainingMs ?? 600_000 });
    await vi.waitFor(() => expect(starts).toBe(10), { timeout: 30_000, interval: 5 });
    clock.advance(options.jobMs ?? 100);
    for (const end of running.splice(0, 5)) end(); // five end: half a batch is free, a claim goes out
    await vi.waitFor(() => expect(starts).toBe(15), { timeout: 30_000, interval: 5 });
    const claimsBefore = claimed.length;
    for (const end of running.splice(0, 5)) end(); // the other five, as old, end while it was out
    await nextTurns(300);
    const startedWithoutClaim = starts - 15;
    const claimsMeanwhile = claimed.length - claimsBefore;
    await more?.({ clock, running, claimed, starts: () => starts, others: () => others });
    // Let the rest run to the end (the clock stays: no lease runs out while a claim is on its way).
    return { summary: await runToEnd(run, running), claimed, startedWithoutClaim, claimsMeanwhile };
  };

  it('claims ahead for the slots that free while its claim is out, and they start without waiting for another', async () => {
    const { summary, claimed, startedWithoutClaim, claimsMeanwhile } = await scenario({ roundTripMs: 40 });
    // The second claim asked for the five free slots and the five that end within its 40 ms.
    expect(claimed.slice(0, 2)).toEqual([10, 10]);
    expect(startedWithoutClaim).toBe(5);
    expect(claimsMeanwhile).toBe(0);
    expect(summary).toMatchObject({ claimed: 40, completed: 40, released: 0 });
  });

  it('claims before half a batch is free when the running attempts come within a round trip of their end', async () => {
    let early: number[] = [];
    await scenario({ roundTripMs: 40 }, async ({ clock, running, claimed, starts }) => {
      // Ten jobs now run, all started as the second claim was answered; the kind's usual duration in
      // this invocation is ~100 ms (the three that end early below pull it down to ~70 ms).
      await vi.waitFor(() => expect(starts()).toBe(20), { timeout: 30_000, interval: 5 });
      const before = claimed.length;
      clock.advance(30);
      for (const end of running.splice(0, 3)) end(); // three free: not half a batch
      await nextTurns(300);
      expect(claimed.length).toBe(before);
      // 30 ms later the other seven are within a round trip (40 ms) of their usual end: the loop wakes and
      // claims for all ten, long before a freed slot has waited flushIntervalMs (200 ms).
      clock.advance(30);
      await vi.waitFor(() => expect(claimed.length).toBe(before + 1), { timeout: 30_000, interval: 5 });
      early = claimed.slice(before);
    });
    expect(early).toEqual([10]);
  });

  it('starts the jobs claimed ahead as their slots free, and their outcomes ride along the next claim', async () => {
    let settledAlone = -1;
    let nextClaim: number[] = [];
    let completedByThen = -1;
    const { summary } = await scenario({ roundTripMs: 40 }, async ({ clock, running, claimed, starts, others }) => {
      await vi.waitFor(() => expect(starts()).toBe(20), { timeout: 30_000, interval: 5 });
      // All ten come within a round trip of their usual end (~127 ms) together: one claim goes out for
      // all their slots, and its ten jobs wait locally while the ten run.
      const before = claimed.length;
      clock.advance(100);
      await vi.waitFor(() => expect(claimed.length).toBe(before + 1), { timeout: 30_000, interval: 5 });
      const othersBefore = others();
      for (const end of running.splice(0)) end(); // a whole batch of outcomes, with jobs waiting for their slots
      await vi.waitFor(() => expect(starts()).toBe(30), { timeout: 30_000, interval: 5 });
      settledAlone = others() - othersBefore;
      // The next claim, as the ten come within a round trip of their end, carries the outcomes.
      clock.advance(100);
      await vi.waitFor(() => expect(claimed.length).toBe(before + 2), { timeout: 30_000, interval: 5 });
      nextClaim = claimed.slice(before + 1);
      expect(others()).toBe(othersBefore);
      const { rows } = await t.admin.query(
        `select count(*)::int as n from "${t.schema}".jobs where state = 'completed'`,
      );
      completedByThen = rows[0].n;
    });
    expect(settledAlone).toBe(0);
    expect(nextClaim).toEqual([10]);
    expect(completedByThen).toBe(20); // every job that ended so far: written by the claims alone
    expect(summary).toMatchObject({ claimed: 40, completed: 40, released: 0 });
  });

  it('over a fast link claims only for the free slots', async () => {
    const { summary, claimed } = await scenario({ roundTripMs: 0 });
    expect(claimed.slice(0, 2)).toEqual([10, 5]);
    expect(summary).toMatchObject({ claimed: 40, completed: 40, released: 0 });
  });

  it('does not claim ahead of attempts shorter than a round trip: their outcomes ride along the next claim', async () => {
    const { summary, claimed } = await scenario({ roundTripMs: 40, jobMs: 20 });
    expect(claimed.slice(0, 2)).toEqual([10, 5]);
    expect(summary).toMatchObject({ claimed: 40, completed: 40, released: 0 });
  });

  it('does not claim ahead of attempts with a destination: a failure among them may open a breaker the next claim must see', async () => {
    const { summary, claimed } = await scenario({ roundTripMs: 40, destination: true });
    expect(claimed.slice(0, 2)).toEqual([10, 5]);
    expect(summary).toMatchObject({ claimed: 40, completed: 40, released: 0 });
  });

  it('claims no further ahead than the jobs claimed could still finish before claiming stops', async () => {
    // Claiming stops 1,750 ms after the start (the rest is the 1,000 ms safety margin). The second claim
    // goes out 600 ms in (the sweep's and the first claim's round trips of 100 ms, then the jobs' 400 ms):
    // a 1,000 ms job it brings starts in time, 700 ms in, but one that waited for a slot freeing while
    // the claim is out would start two round trips from now, too late: only the free slots are claimed.
    const { claimed } = await scenario({
      roundTripMs: 100,
      jobMs: 400,
      timeoutMs: 1_000,
      remainingMs: 1_750 + 1_000,
    });
    expect(claimed.slice(0, 2)).toEqual([10, 5]);
  });
});

/**
 * Jobs that end within a round trip, over a link whose every hot statement moves the invocation's clock
 * on by 40 ms: the order in which claims leave (when the executor is called) and jobs start.
 */
describe(`claiming before short jobs start (${testDriver()})`, () => {
  const order = async (destination: boolean) => {
    const clock = new ManualClock();
    const events: { what: string }[] = [];
    const quick = defineJob({
      kind: 'quick',
      payload: z.object({ n: z.number() }),
      ...(destination ? { destination: () => 'partner.example' } : {}),
      handler: async () => {
        events.push({ what: 'job' });
      },
    });
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 30 }, (_, n) => quick.with({ n })),
    );
    const slow = slowLink(clock, 40, () => {
      const sent = { what: 'statement' };
      events.push(sent);
      return (jobs) => {
        if (jobs !== undefined) sent.what = `claim ${jobs}`;
      };
    });
    const summary = await createWorker({
      db: slow,
      schema: t.schema,
      jobs: [quick],
      logger: silentLogger,
      clock,
      concurrency: 10,
    }).runInvocation({ remainingMs: 600_000 });
    // Runs of jobs as one entry with their count.
    const collapsed: string[] = [];
    let jobs = 0;
    for (const { what } of events) {
      if (what === 'job') {
        jobs++;
        continue;
      }
      if (jobs > 0) collapsed.push(`${jobs} jobs`);
      jobs = 0;
      collapsed.push(what);
    }
    if (jobs > 0) collapsed.push(`${jobs} jobs`);
    const completed = await t.admin.query(
      `select count(*)::int as n from "${t.schema}".jobs where state = 'completed' and attempt = 1`,
    );
    return { summary, collapsed, completed: completed.rows[0].n as number };
  };

  it('sends the next claim before they start, and their outcomes ride along the claim after it', async () => {
    const { summary, collapsed, completed } = await order(false);
    // The first ten start before the next claim: their duration is not known yet. From then on each
    // claim leaves before the jobs the last one brought start; the one that finds the queue empty
    // carries the outcomes of the jobs before the last ten, and one more look carries those of the last.
    // No statement of their own for the outcomes: the sweep is the only other one.
    expect(collapsed).toEqual([
      'statement',
      'claim 10',
      '10 jobs',
      'claim 10',
      'claim 10',
      '10 jobs',
      'claim 0',
      '10 jobs',
      'claim 0',
    ]);
    expect(summary).toMatchObject({ claimed: 30, completed: 30, released: 0 });
    expect(completed).toBe(30);
  });

  it('not before jobs with a destination: a failure among them may open a breaker the next claim must see', async () => {
    const { summary, collapsed } = await order(true);
    expect(collapsed).toEqual([
      'statement',
      'claim 10',
      '10 jobs',
      'claim 10',
      '10 jobs',
      'claim 10',
      '10 jobs',
      'claim 0',
    ]);
    expect(summary).toMatchObject({ claimed: 30, completed: 30, released: 0 });
  });
});
