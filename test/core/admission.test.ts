import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { LANES_AFTER } from '../../core/worker/admission.js';
import { createWorker, type InvocationStarter, type WorkerOptions } from '../../core/worker/index.js';
import { CLAIM_LANES, LANE_RUN } from '../../db/statements/claim.js';
import { ManualClock } from '../../testing/clock.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-admission', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

/** The registrations that count now, with the lifetime each was given (expires_at - started_at). */
const registrations = async () =>
  (
    await t.admin.query(
      `select invocation_id, extract(epoch from expires_at - started_at) * 1000 as lifetime_ms
       from "${t.schema}".invocations where expires_at > clock_timestamp() order by slot`,
    )
  ).rows as { invocation_id: string; lifetime_ms: string }[];

/** A kind whose jobs each take 100 ms of `clock`: one invocation at concurrency 10 finishes 10 a second. */
function slowOn(clock: ManualClock) {
  return defineJob({
    kind: 'slow',
    payload: z.object({ n: z.number() }),
    timeoutMs: 1_000,
    handler: () => {
      clock.advance(100);
    },
  });
}

/** A handler that waits until the test opens the gate: invocations that stay running on demand. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe(`the cap on running invocations (${testDriver()})`, () => {
  it('a third invocation while two run (maxInvocations 2) returns at once, saturated, having claimed nothing', async () => {
    const held = gate();
    let started = 0;
    let bothStarted!: () => void;
    const running = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    const blocking = defineJob({
      kind: 'blocking',
      payload: z.object({ n: z.number() }),
      timeoutMs: 30_000,
      handler: async () => {
        if (++started === 2) bothStarted();
        await held.opened;
      },
    });
    await q.enqueueMany(
      t.db,
      [0, 1, 2].map((n) => blocking.with({ n })),
    );
    // Separate connections, as separate function instances have.
    const connections = [openDb(), openDb(), openDb()];
    try {
      const options = (i: number): WorkerOptions => ({
        db: connections[i] as WorkerOptions['db'],
        schema: t.schema,
        jobs: [blocking],
        logger: silentLogger,
        maxInvocations: 2,
        name: 'emails-worker',
        concurrency: 1,
        // A clock that stands still: each budget at registration is the whole 60 s it was given.
        clock: new ManualClock(),
      });
      const first = createWorker(options(0)).runInvocation({ remainingMs: 60_000, invocationId: 'one' });
      const second = createWorker(options(1)).runInvocation({ remainingMs: 60_000, invocationId: 'two' });
      await running;
      // Each registration lives as long as its invocation's budget plus the lease grace (5 s).
      const held2 = await registrations();
      expect(held2.map((r) => r.invocation_id).sort()).toEqual(['one', 'two']);
      for (const r of held2) expect(Number(r.lifetime_ms)).toBe(65_000);

      const third = await createWorker(options(2)).runInvocation({ remainingMs: 60_000, invocationId: 'three' });
      expect(third).toMatchObject({ stoppedBecause: 'saturated', claimed: 0, invocationsStarted: 0 });

      held.open();
      expect(await first).toMatchObject({ stoppedBecause: 'drained' });
      expect(await second).toMatchObject({ stoppedBecause: 'drained' });
      // Both slots were freed as the invocations returned.
      expect(await registrations()).toEqual([]);
      // The two took the third job themselves once their first ended; a new invocation is admitted.
      const fourth = await createWorker(options(2)).runInvocation({ remainingMs: 60_000, invocationId: 'four' });
      expect(fourth).toMatchObject({ stoppedBecause: 'drained', claimed: 0 });
      const { rows } = await t.admin.query(
        `select count(*)::int as n from "${t.schema}".jobs where state = 'completed'`,
      );
      expect(rows[0].n).toBe(3);
    } finally {
      held.open();
      await Promise.all(connections.map((c) => c.close()));
    }
  });

  it("a crashed invocation's registration stops counting once it expires, with no cleanup", async () => {
    const noop = defineJob({ kind: 'noop', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
    await q.enqueue(t.db, noop, {});
    const run = () =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [noop],
        logger: silentLogger,
        maxInvocations: 1,
      }).runInvocation({ remainingMs: 10_000 });
    // An invocation that died mid-run left its row behind.
    await t.admin.query(
      `insert into "${t.schema}".invocations (worker, slot, invocation_id, started_at, expires_at)
       values ('worker', 1, 'crashed', now(), now() + interval '1 minute')`,
    );
    expect(await run()).toMatchObject({ stoppedBecause: 'saturated', claimed: 0 });
    // Its budget (plus grace) has passed: the row no longer counts, and is taken over.
    await t.admin.query(`update "${t.schema}".invocations set expires_at = now() - interval '1 millisecond'`);
    expect(await run()).toMatchObject({ stoppedBecause: 'drained', claimed: 1, completed: 1 });
  });

  it('an invocation with nothing to do sends only its sweep: it takes no slot and frees none', async () => {
    const noop = defineJob({ kind: 'noop', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
    const run = () =>
      captureStatements(testDriver(), () =>
        createWorker({
          db: t.db,
          schema: t.schema,
          jobs: [noop],
          logger: silentLogger,
          maxInvocations: 2,
        }).runInvocation({ remainingMs: 10_000 }),
      );
    const idle = await run();
    expect(idle.result).toMatchObject({ stoppedBecause: 'drained', claimed: 0 });
    expect(idle.texts).toHaveLength(1);
    expect(idle.texts[0]).toContain('by_deadline');
    // With a job to run it registers after the sweep, and frees its slot as it returns.
    await q.enqueue(t.db, noop, {});
    const busy = await run();
    expect(busy.result).toMatchObject({ stoppedBecause: 'drained', claimed: 1, completed: 1 });
    const registers = busy.texts.filter((text) => /insert into \S+\.(")?invocations/.test(text));
    const unregisters = busy.texts.filter((text) => /delete from \S+\.(")?invocations/.test(text));
    expect([registers.length, unregisters.length]).toEqual([1, 1]);
    expect(busy.texts.findIndex((text) => text.includes('by_deadline'))).toBeLessThan(
      busy.texts.indexOf(registers[0] as string),
    );
    expect(await registrations()).toEqual([]);
  });

  it('fanOut needs maxInvocations', () => {
    const noop = defineJob({ kind: 'noop', payload: z.object({}), handler: () => {} });
    const starter: InvocationStarter = { start: async () => {} };
    expect(() => createWorker({ db: t.db, schema: t.schema, jobs: [noop], fanOut: starter })).toThrow(ConfigError);
    expect(() => createWorker({ db: t.db, schema: t.schema, jobs: [noop], maxInvocations: 0 })).toThrow(
      'maxInvocations must be an integer from 1 to 1000',
    );
  });
});

describe(`fan-out (${testDriver()})`, () => {
  it('a backlog more than one invocation drains in the target time starts the invocations it needs, once, within the cap', async () => {
    // Each job takes 100 ms of the invocation's clock; 10 at a time, so one invocation finishes
    // 10 jobs a second: 50 in the 5 s target. 200 jobs need 4 invocations; this one is the first.
    const clock = new ManualClock();
    const slow = slowOn(clock);
    await q.enqueueMany(
      t.db,
      Array.from({ length: 200 }, (_, n) => slow.with({ n })),
    );
    const starts: number[] = [];
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [slow],
      logger: silentLogger,
      clock,
      concurrency: 10,
      maxInvocations: 8,
      fanOut: { start: async (count) => void starts.push(count) },
    }).runInvocation({ remainingMs: 600_000 });
    // The three it started never arrived (nothing runs them here): it counted them as arriving
    // for 10 s of its clock, then started what was still missing, never past the cap of 8.
    expect(starts[0]).toBe(3);
    expect(starts.reduce((a, b) => a + b, 0)).toBe(summary.invocationsStarted);
    for (const count of starts) expect(count).toBeLessThanOrEqual(7);
    expect(summary).toMatchObject({ claimed: 200, completed: 200, stoppedBecause: 'drained' });
  });

  it('only the oldest registered invocation fans out: a sibling that sees the same backlog starts nothing', async () => {
    const clock = new ManualClock();
    const slow = slowOn(clock);
    await q.enqueueMany(
      t.db,
      Array.from({ length: 200 }, (_, n) => slow.with({ n })),
    );
    // Slot 1 is held by an invocation registered before this one: it decides, this one does not.
    await t.admin.query(
      `insert into "${t.schema}".invocations (worker, slot, invocation_id, started_at, expires_at)
       values ('worker', 1, 'leader', now(), now() + interval '1 hour')`,
    );
    const starts: number[] = [];
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [slow],
      logger: silentLogger,
      clock,
      concurrency: 10,
      maxInvocations: 8,
      fanOut: { start: async (count) => void starts.push(count) },
    }).runInvocation({ remainingMs: 600_000 });
    expect(summary).toMatchObject({ claimed: 200, completed: 200, invocationsStarted: 0 });
    expect(starts).toEqual([]);
  });

  it('a backlog one invocation drains in the target time starts nothing; a failing start is logged, never fatal', async () => {
    const clock = new ManualClock();
    const slow = slowOn(clock);
    const warnings: string[] = [];
    const run = (fanOut: InvocationStarter) =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [slow],
        logger: { ...silentLogger, warn: (message: string) => void warnings.push(message) },
        clock,
        concurrency: 10,
        maxInvocations: 4,
        fanOut,
      }).runInvocation({ remainingMs: 600_000 });

    const starts: number[] = [];
    await q.enqueueMany(
      t.db,
      Array.from({ length: 40 }, (_, n) => slow.with({ n })),
    );
    expect(await run({ start: async (count) => void starts.push(count) })).toMatchObject({
      completed: 40,
      invocationsStarted: 0,
    });
    expect(starts).toEqual([]);

    await q.enqueueMany(
      t.db,
      Array.from({ length: 200 }, (_, n) => slow.with({ n })),
    );
    const failing = await run({
      start: async () => {
        throw new Error('Invoke refused');
      },
    });
    expect(failing).toMatchObject({ claimed: 200, completed: 200, stoppedBecause: 'drained' });
    expect(warnings).toContain('fan_out_failed');
  });
});

describe(`claim lanes (${testDriver()})`, () => {
  /** The texts of the claims the last claimsBeside sent, in order. */
  let claimTexts: string[] = [];
  /** Runs one counted invocation (cap 5) beside `others` running ones; returns the ids of its claims, claim by claim. */
  async function claimsBeside(others: number): Promise<string[][]> {
    const started: string[] = [];
    const noop = defineJob({
      kind: 'noop',
      payload: z.object({ n: z.number() }),
      timeoutMs: 1_000,
      handler: (_payload, ctx) => void started.push(ctx.id),
    });
    await q.enqueueMany(
      t.db,
      Array.from({ length: LANE_RUN * CLAIM_LANES }, (_, n) => noop.with({ n })),
    );
    for (let slot = 1; slot <= others; slot++) {
      await t.admin.query(
        `insert into "${t.schema}".invocations (worker, slot, invocation_id, started_at, expires_at)
         values ('worker', $1, $2, now(), now() + interval '1 hour')`,
        [slot, `other-${slot}`],
      );
    }
    const { result: summary, texts } = await captureStatements(testDriver(), () =>
      createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [noop],
        logger: silentLogger,
        concurrency: 10,
        batchSize: 10,
        maxInvocations: 5,
      }).runInvocation({ remainingMs: 60_000 }),
    );
    claimTexts = texts.filter((text) => text.includes('claimed as ('));
    expect(summary).toMatchObject({ claimed: LANE_RUN * CLAIM_LANES, stoppedBecause: 'drained' });
    return Array.from({ length: 12 }, (_, i) => started.slice(i * 10, i * 10 + 10));
  }
  const laneOf = (id: string) => Number((BigInt(id) / BigInt(LANE_RUN)) % BigInt(CLAIM_LANES));
  const lowestIds = async (count = 10) =>
    (await t.admin.query(`select j.id::text as id from "${t.schema}".jobs j order by j.id limit $1`, [count])).rows.map(
      (r) => r.id as string,
    );

  it(`with ${LANES_AFTER} others running, each claim takes the next lane from the slot on`, async () => {
    // Slots 1-4 are held, so this invocation holds slot 5: lanes 5, 6, 7 for its first three claims.
    const claims = await claimsBeside(LANES_AFTER);
    const all = (await lowestIds(LANE_RUN * CLAIM_LANES)).map(Number); // every job of this test, by id
    expect(claims.slice(0, 3).map((ids) => [...new Set(ids.map(laneOf))])).toEqual([[5], [6], [7]]);
    // Its 12th claim falls on lane 0, which means the head: the lowest ids not yet taken.
    const taken = new Set(claims.slice(0, 11).flat().map(Number));
    expect(claims[11]?.map(Number)).toEqual(all.filter((id) => !taken.has(id)).slice(0, 10));
  });

  it("sends one claim text: its first claim (nothing to settle), the steady state's and the head's turn", async () => {
    // One text, one plan per connection where plans are kept (pg's named statements): the first claim
    // carries an empty settle, and lane 0 (the head) is the lane claim with a lane that never applies.
    await claimsBeside(LANES_AFTER);
    expect(claimTexts.length).toBeGreaterThan(CLAIM_LANES); // the head's turn (the 12th) among them
    expect(new Set(claimTexts).size).toBe(1);
  });

  it(`with fewer than ${LANES_AFTER} others running, it claims from the head in strict order`, async () => {
    const claims = await claimsBeside(LANES_AFTER - 1);
    expect(claims[0]).toEqual(await lowestIds());
  });
});
