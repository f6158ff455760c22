import { describe, expect, it } from 'vitest';
import { readBacklog, registerInvocation, unregisterInvocation } from '../../db/statements/invocations.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

let t: TestContext;
useTestSchema('invocations', (ctx) => {
  t = ctx;
});

const at = (ms: number) => new Date(Date.UTC(2026, 10, 22, 12, 0, 0) + ms);
const held = async (worker: string, now: Date) =>
  (
    await t.admin.query(
      `select count(*)::int as n from "${t.schema}".invocations where worker = $1 and expires_at > $2`,
      [worker, now],
    )
  ).rows[0].n as number;

describe(`invocation registrations (${testDriver()})`, () => {
  it('16 invocations registering at once on separate connections: never more than the cap hold a slot', async () => {
    const connections = Array.from({ length: 8 }, () => openDb({ max: 2 }));
    try {
      const now = at(0);
      const results = await Promise.all(
        Array.from({ length: 16 }, async (_, i) => {
          const db = (connections[i % connections.length] as (typeof connections)[number]).executor;
          // As the worker does: try again with a fresh look while the others' count leaves room.
          for (let tries = 0; tries <= 5; tries++) {
            const r = await registerInvocation(db, t.schema, {
              worker: 'w',
              invocationId: `inv-${i}`,
              max: 5,
              ttlMs: 60_000,
              now,
            });
            if (r.slot !== null) return r.slot;
            if (r.running >= 5) return null;
          }
          return null;
        }),
      );
      const slots = results.filter((s): s is number => s !== null);
      expect(slots.length).toBeLessThanOrEqual(5);
      expect(new Set(slots).size).toBe(slots.length);
      expect(slots.length).toBe(5); // every slot found a holder
      expect(await held('w', now)).toBe(5);
    } finally {
      await Promise.all(connections.map((c) => c.close()));
    }
  });

  it('a slot frees itself when its registration expires (a crashed invocation), or when unregistered', async () => {
    const first = await registerInvocation(t.db.executor, t.schema, {
      worker: 'w',
      invocationId: 'crashed',
      max: 1,
      ttlMs: 10_000,
      now: at(0),
    });
    expect(first).toEqual({ slot: 1, running: 0 });
    const refused = await registerInvocation(t.db.executor, t.schema, {
      worker: 'w',
      invocationId: 'b',
      max: 1,
      ttlMs: 10_000,
      now: at(9_999),
    });
    expect(refused).toEqual({ slot: null, running: 1 });
    // Other workers count on their own.
    const other = await registerInvocation(t.db.executor, t.schema, {
      worker: 'other',
      invocationId: 'c',
      max: 1,
      ttlMs: 10_000,
      now: at(9_999),
    });
    expect(other.slot).toBe(1);
    const afterExpiry = await registerInvocation(t.db.executor, t.schema, {
      worker: 'w',
      invocationId: 'b',
      max: 1,
      ttlMs: 10_000,
      now: at(10_000),
    });
    expect(afterExpiry).toEqual({ slot: 1, running: 0 });
    await unregisterInvocation(t.db.executor, t.schema, { worker: 'w', invocationId: 'b' });
    expect(await held('w', at(10_001))).toBe(0);
  });

  it('the one that fans out is the oldest registration, not the lowest slot: the invocations it started do not take over as they arrive', async () => {
    // What the serverless bench saw: the tick's invocation drew slot 5 and started 19 others; one of
    // them drew slot 1, decided with no memory of the starts under way, and started one more.
    await t.admin.query(
      `insert into "${t.schema}".invocations (worker, slot, invocation_id, started_at, expires_at) values
         ('fan', 5, 'first', now() - interval '1 second', now() + interval '1 hour'),
         ('fan', 1, 'started-by-first', now(), now() + interval '1 hour')`,
    );
    expect(await readBacklog(t.db.executor, t.schema, { worker: 'fan', kinds: ['send-email'], cap: 1 })).toMatchObject({
      running: 2,
      leaderSlot: 5,
    });
    await t.admin.query(`delete from "${t.schema}".invocations where worker = 'fan'`);
  });

  it('the backlog read counts ready jobs up to its cap, for the kinds and queues asked, and the running invocations', async () => {
    const q = enqueuerFor(t.schema);
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 30 }, (_, i) => sendEmail.with({ to: `u${i}@example.com`, subject: 's' })),
      sendEmail.with({ to: 'x@example.com', subject: 's' }, { queue: 'elsewhere' }),
      sendEmail.with({ to: 'y@example.com', subject: 's' }, { delayMs: 3_600_000 }),
    ]);
    const a = await registerInvocation(t.db.executor, t.schema, {
      worker: 'w',
      invocationId: 'a',
      max: 3,
      ttlMs: 60_000,
    });
    const b = await registerInvocation(t.db.executor, t.schema, {
      worker: 'w',
      invocationId: 'b',
      max: 3,
      ttlMs: 60_000,
    });
    expect(b.slot).not.toBe(a.slot);
    // The oldest registration is the one that fans out, whatever the slots drawn.
    const leaderSlot = a.slot;
    const read = (cap: number, queues?: string[]) =>
      readBacklog(t.db.executor, t.schema, { worker: 'w', kinds: ['send-email'], queues, cap });
    expect(await read(1000, ['emails'])).toEqual({ ready: 30, running: 2, leaderSlot });
    expect(await read(10, ['emails'])).toEqual({ ready: 10, running: 2, leaderSlot });
    expect(await read(1000)).toEqual({ ready: 31, running: 2, leaderSlot });
    expect(await readBacklog(t.db.executor, t.schema, { worker: 'w', kinds: ['other-kind'], cap: 1000 })).toEqual({
      ready: 0,
      running: 2,
      leaderSlot,
    });
    expect(await readBacklog(t.db.executor, t.schema, { worker: 'nobody', kinds: ['send-email'], cap: 1 })).toEqual({
      ready: 1,
      running: 0,
      leaderSlot: null,
    });
  });
});
