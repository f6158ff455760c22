import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cancel, moveToDlq, stats } from '../../core/admin.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { buryDoomed } from '../../db/statements/bury.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { releaseParked } from '../../db/statements/ordering.js';
import { replayDead } from '../../db/statements/replay.js';
import { settleJobs } from '../../db/statements/settle.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('ordering', (ctx) => {
  t = ctx;
});

const event = defineJob({
  kind: 'order-event',
  payload: z.object({ orderId: z.string(), step: z.number() }),
  orderingKey: (p) => `order-${p.orderId}`,
  maxAttempts: 5,
});
const held = defineJob({
  kind: 'held-event',
  payload: z.object({ orderId: z.string(), step: z.number() }),
  orderingKey: (p) => `held-${p.orderId}`,
  orderingOnDead: 'hold',
  maxAttempts: 1,
});
const plain = defineJob({ kind: 'plain', payload: z.object({ n: z.number() }) });
const LEASES = [
  { kind: 'order-event', leaseMs: 30_000 },
  { kind: 'held-event', leaseMs: 30_000 },
  { kind: 'plain', leaseMs: 30_000 },
];
const enqueuer = () => createEnqueuer({ schema: t.schema });
const claim = (overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 50, invocationId: 'inv', ...overrides });
const steps = (jobs: { payload: unknown }[]) => jobs.map((j) => (j.payload as { step: number }).step);
/** Completes jobs as a worker does: each outcome carries its job's key, and the same statement releases the next job. */
const complete = (jobs: { id: string; leaseToken: string; orderingKey?: string | null }[]) =>
  settleJobs(
    t.db.executor,
    t.schema,
    jobs.map((j) => ({
      id: j.id,
      leaseToken: j.leaseToken,
      outcome: 'completed' as const,
      ...(j.orderingKey ? { orderingKey: j.orderingKey } : {}),
    })),
  );
const enqueueSteps = (job: typeof event, orderId: string, count: number) =>
  enqueuer().enqueueMany(
    t.db,
    Array.from({ length: count }, (_, i) => job.with({ orderId, step: i + 1 })),
  );

describe(`ordering keys (${testDriver()})`, () => {
  it('the plain claim leaves jobs with a key to the ordered claim, which follows in the same call', async () => {
    const q = enqueuer();
    await q.enqueue(t.db, plain, { n: 1 });
    // No key anywhere: the plain claim takes the job and says the next one need not be ordered.
    const alone = await claim();
    expect(alone.jobs.map((j) => j.kind)).toEqual(['plain']);
    expect(alone.ordered).toBe(false);
    await q.enqueue(t.db, event, { orderId: 'a', step: 1 });
    await q.enqueue(t.db, plain, { n: 2 });
    // A keyed job waits: the plain claim takes nothing and the ordered claim, sent at once, takes both.
    const settle = alone.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
    const both = await claim({ settle });
    expect(both.jobs.map((j) => j.kind).sort()).toEqual(['order-event', 'plain']);
    expect(both.ordered).toBe(true);
    // Told so, the next claim goes straight to the ordered shape, which finds the key busy.
    await q.enqueue(t.db, event, { orderId: 'a', step: 2 });
    expect((await claim({ ordered: true })).jobs).toEqual([]);
  });

  it('one job per key at a time, in enqueue order; other work is not held back', async () => {
    await enqueueSteps(event, '42', 3);
    await enqueuer().enqueue(t.db, plain, { n: 1 });
    const first = await claim();
    expect(first.jobs.map((j) => j.kind).sort()).toEqual(['order-event', 'plain']);
    expect(steps(first.jobs.filter((j) => j.kind === 'order-event'))).toEqual([1]);
    expect(first.jobs.find((j) => j.kind === 'order-event')?.orderingKey).toBe('order-42');
    expect((await claim()).jobs).toEqual([]); // step 2 waits for step 1
    const [row] = (await stats(t.db, { schema: t.schema })).filter((r) => r.kind === 'order-event');
    expect(row).toMatchObject({ running: 1, waiting: 2, scheduled: 0, ready: 0 });
    await complete(first.jobs);
    const second = await claim();
    expect(steps(second.jobs)).toEqual([2]);
    await complete(second.jobs);
    expect(steps((await claim()).jobs)).toEqual([3]);
  });

  it('a retrying head blocks its key until it completes; its rescue after a lost lease keeps the order', async () => {
    await enqueueSteps(event, '7', 2);
    const [head] = (await claim()).jobs;
    await settleJobs(t.db.executor, t.schema, [
      {
        id: head?.id as string,
        leaseToken: head?.leaseToken as string,
        outcome: 'retry',
        delayMs: 1_000,
        error: { class: 'Error', message: 'partner down' },
        orderingKey: 'order-7', // a retried job keeps its key: nothing is released
      },
    ]);
    await releaseParked(t.db.executor, t.schema, { keys: ['order-7'], limit: 1 });
    const later = new Date(Date.now() + 5_000);
    expect((await claim({ now: new Date() })).jobs).toEqual([]);
    // Due again: the head runs, not step 2; its lease then expires and a rescue takes it, still alone.
    const retried = (await claim({ now: later })).jobs;
    expect(steps(retried)).toEqual([1]);
    const muchLater = new Date(Date.now() + 120_000);
    const rescued = (await claim({ now: muchLater })).jobs;
    expect(rescued.map((j) => [j.id, j.attempt])).toEqual([[head?.id, 3]]);
    await complete(rescued);
    expect(steps((await claim({ now: muchLater })).jobs)).toEqual([2]);
  });

  it("a dead head lets its key go on by default ('continue'); with 'hold' the key waits for its replay", async () => {
    await enqueueSteps(event, '1', 2);
    await enqueueSteps(held as unknown as typeof event, '1', 2);
    const heads = (await claim()).jobs;
    expect(heads.map((j) => j.kind).sort()).toEqual(['held-event', 'order-event']);
    await settleJobs(
      t.db.executor,
      t.schema,
      heads.map((j) => ({
        id: j.id,
        leaseToken: j.leaseToken,
        outcome: 'dead' as const,
        reason: 'http_4xx',
        error: { class: 'DiscardError', message: 'bad request' },
      })),
    );
    await releaseParked(t.db.executor, t.schema, { keys: ['order-1', 'held-1'], limit: 2 });
    const next = (await claim()).jobs;
    expect(next.map((j) => [j.kind, (j.payload as { step: number }).step])).toEqual([['order-event', 2]]);
    // The held key goes on only through its dead head: replayed, it runs first.
    const heldHead = heads.find((j) => j.kind === 'held-event')?.id as string;
    await replayDead(t.db.executor, t.schema, {
      filter: { ids: [heldHead] },
      limit: 10,
      by: 'test',
      dryRun: false,
      resetAttempts: true,
    });
    const replayed = (await claim()).jobs;
    expect(replayed.map((j) => [j.id, (j.payload as { step: number }).step])).toEqual([[heldHead, 1]]);
    await complete(replayed);
    expect(steps((await claim()).jobs)).toEqual([2]);
  });

  it('a dead head replayed while the next job of its key runs waits for it, then runs before the rest', async () => {
    await enqueueSteps(event, '9', 3);
    const [head] = (await claim()).jobs;
    await settleJobs(t.db.executor, t.schema, [
      {
        id: head?.id as string,
        leaseToken: head?.leaseToken as string,
        outcome: 'dead',
        reason: 'http_4xx',
        error: { class: 'DiscardError', message: 'bad request' },
      },
    ]);
    await releaseParked(t.db.executor, t.schema, { keys: ['order-9'], limit: 1 });
    const second = (await claim()).jobs;
    expect(steps(second)).toEqual([2]);
    await replayDead(t.db.executor, t.schema, {
      filter: { ids: [head?.id as string] },
      limit: 10,
      by: 'test',
      dryRun: false,
      resetAttempts: false,
    });
    expect((await claim()).jobs).toEqual([]); // step 2 still runs
    await complete(second);
    expect(steps((await claim()).jobs)).toEqual([1]); // the replayed head, before step 3
  });

  it('cancelling the job of a key hands the key to the next job at once; cancelling a waiting one changes nothing else', async () => {
    await enqueueSteps(event, '5', 3);
    const [head] = (await claim()).jobs;
    const waiting = await t.admin.query(
      `select id::text from "${t.schema}".jobs where ordering_key = 'order-5' and run_at = 'infinity' order by id`,
    );
    const [second, third] = waiting.rows.map((r) => r.id as string);
    // The third (parked) is cancelled: step 1 still runs alone, step 2 still waits.
    expect((await cancel(t.db, [third as string], { schema: t.schema }))[0]?.cancelled).toBe(true);
    expect((await claim()).jobs).toEqual([]);
    // The running head is cancelled: step 2 is released by the same statement.
    expect((await cancel(t.db, [head?.id as string], { schema: t.schema }))[0]?.cancelled).toBe(true);
    expect((await claim()).jobs.map((j) => j.id)).toEqual([second]);
  });

  it('moving the running head of a key to the DLQ by hand releases the next job, unless its kind holds the key', async () => {
    await enqueueSteps(event, '6', 2);
    await enqueueSteps(held, '6', 2);
    const heads = (await claim()).jobs;
    expect(heads.map((j) => j.kind).sort()).toEqual(['held-event', 'order-event']);
    const moved = await moveToDlq(
      t.db,
      heads.map((j) => j.id),
      { schema: t.schema, by: 'test' },
    );
    expect(moved.every((m) => m.moved)).toBe(true);
    // order-event continues with step 2 at once; held-event's key waits for the replay of its head.
    expect((await claim()).jobs.map((j) => [j.kind, (j.payload as { step: number }).step])).toEqual([
      ['order-event', 2],
    ]);
  });

  it('a head buried when its last lease expired keeps its key when its kind holds it', async () => {
    await enqueuer().enqueueMany(t.db, [
      held.with({ orderId: '3', step: 1 }, { orderingKey: 'bury-3' }),
      plain.with({ n: 2 }, { orderingKey: 'bury-3' }),
    ]);
    const [head] = (await claim()).jobs; // held-event: one attempt, so an expired lease buries it
    expect(head?.kind).toBe('held-event');
    const later = new Date(Date.now() + 120_000);
    const buried = await buryDoomed(t.db.executor, t.schema, { kinds: ['held-event', 'plain'], limit: 10, now: later });
    expect(buried.map((b) => [b.id, b.reason])).toEqual([[head?.id, 'lease_expired']]);
    // The buried head's kind holds its key when dead ('hold'): the next job waits for a replay.
    expect((await claim({ now: later })).jobs).toEqual([]);
  });

  it('a head buried without holding its key releases the next job in the same statement', async () => {
    await enqueuer().enqueueMany(t.db, [
      plain.with({ n: 1 }, { orderingKey: 'bury-4' }),
      plain.with({ n: 2 }, { orderingKey: 'bury-4' }),
    ]);
    const [head] = (await claim()).jobs;
    await t.admin.query(`update "${t.schema}".jobs set max_attempts = 1 where id = $1`, [head?.id]);
    const later = new Date(Date.now() + 120_000);
    const buried = await buryDoomed(t.db.executor, t.schema, { kinds: ['plain'], limit: 10, now: later });
    expect(buried.map((b) => b.id)).toEqual([head?.id]);
    expect((await claim({ now: later })).jobs.map((j) => (j.payload as { n: number }).n)).toEqual([2]);
  });

  it('enqueue refuses what would reorder a key, with a clear error', async () => {
    const e = enqueuer();
    await expect(e.enqueue(t.db, event, { orderId: '1', step: 1 }, { delayMs: 1_000 })).rejects.toThrow(
      'an ordering key cannot be combined with runAt or delayMs',
    );
    await expect(
      e.enqueue(t.db, event, { orderId: '1', step: 1 }, { dedupe: { key: 'k', mode: 'replace' } }),
    ).rejects.toThrow("an ordering key cannot be combined with dedupe mode 'replace'");
    await expect(e.enqueue(t.db, plain, { n: 1 }, { orderingKey: 'x'.repeat(256) })).rejects.toThrow(/orderingKey/);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`);
    expect(rows[0].n).toBe(0);
  });

  it('the database never lets two jobs of one key run: a second claim that raced is retried, not failed', async () => {
    // Two heads of one key (as two enqueues that raced would leave them), the later one being
    // claimed by another connection whose transaction is still open.
    await enqueuer().enqueue(t.db, plain, { n: 1 }, { orderingKey: 'race' });
    await enqueuer().enqueue(t.db, plain, { n: 2 }, { orderingKey: 'other' });
    await t.admin.query(
      `update "${t.schema}".jobs set ordering_key = 'race', run_at = now() where ordering_key = 'other'`,
    );
    const { rows } = await t.admin.query(`select id::text from "${t.schema}".jobs order by id`);
    const [low, high] = rows.map((r) => r.id as string);
    const other = await t.admin.connect();
    try {
      await other.query('begin');
      await other.query(
        `update "${t.schema}".jobs set state = 'running', attempt = 1, lease_token = gen_random_uuid(),
           lease_expires_at = now() + interval '1 minute', attempted_at = now() where id = $1`,
        [high],
      );
      // This claim sees the low head free and takes it; its update waits on the other's running row.
      const claiming = claim();
      const waiting = async () =>
        (
          await t.admin.query(
            // This schema's claim only: other test files share the server. (Only the statement's start:
            // pg_stat_activity keeps the first 1,024 bytes of a query.)
            `select count(*)::int as n from pg_stat_activity
             where wait_event_type = 'Lock' and query like 'with recursive clock as%' and strpos(query, $1) > 0`,
            [`"${t.schema}"`],
          )
        ).rows[0].n as number;
      while ((await waiting()) === 0) await new Promise((resolve) => setImmediate(resolve));
      await other.query('commit');
      const result = await claiming;
      expect(result.jobs.map((j) => j.id)).not.toContain(low);
    } finally {
      other.release();
    }
    const running = await t.admin.query(
      `select id::text from "${t.schema}".jobs where ordering_key = 'race' and state = 'running'`,
    );
    expect(running.rows.map((r) => r.id)).toEqual([high]);
  });
});
