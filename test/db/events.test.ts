import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, getEvent, listEvents, replayEvents, subscribe, syncSubscriptions } from '../../core/events.js';
import { JobRegistry } from '../../core/jobs.js';
import { runMaintenance } from '../../core/maintenance.js';
import { pruneEvents, reconcileDeliveries, retireSubscriptions } from '../../db/statements/events.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
let q: ReturnType<typeof createEnqueuer>;
useTestSchema('events', (ctx) => {
  t = ctx;
  q = createEnqueuer({ schema: ctx.schema });
});

const signedUp = defineEvent({
  name: 'user.signed-up',
  schema: z.object({ userId: z.string(), plan: z.enum(['free', 'pro']), email: z.string() }),
});
const welcome = subscribe(signedUp, { kind: 'send-welcome', queue: 'emails', maxAttempts: 5 });
const crm = subscribe(signedUp, {
  kind: 'crm-sync',
  where: { plan: 'pro' },
  queue: 'crm',
  priority: 7,
  maxAttempts: 3,
  orderingKey: 'userId',
  destination: 'email',
});
const audit = subscribe(signedUp, { kind: 'audit', concurrencyKey: 'userId', deadlineMs: 3_600_000 });
const registry = () => new JobRegistry([welcome, crm, audit]);
const ada = { userId: 'u1', plan: 'pro' as const, email: 'ada@example.com' };
const bob = { userId: 'u2', plan: 'free' as const, email: 'bob@example.com' };

const jobs = async () =>
  (
    await t.admin.query(
      `select j.kind, j.queue, j.priority, j.max_attempts, j.payload->>'userId' as user, j.ordering_key, j.concurrency_key,
        j.destination, j.deadline is not null as has_deadline, d.event_id::text as event
      from "${t.schema}".jobs j left join "${t.schema}".event_deliveries d on d.job_id = j.id order by j.kind, j.id`,
    )
  ).rows;
const count = async (table: string) =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".${table}`)).rows[0].n as number;
const sync = (now?: Date) => syncSubscriptions(t.db, registry(), { schema: t.schema, now });
const opened: ReturnType<typeof openDb>[] = [];
/** A second connection of its own (closed after the file). */
const openDbOnce = () => {
  const db = openDb();
  opened.push(db);
  return db;
};
afterAll(async () => {
  for (const db of opened.splice(0)) await db.close();
});
const clean = () =>
  t.admin.query(`truncate "${t.schema}".events, "${t.schema}".event_deliveries, "${t.schema}".subscriptions`);

describe(`events (${testDriver()})`, () => {
  it('sync writes each subscription once: an unchanged one writes nothing, a changed one is updated', async () => {
    await clean();
    expect((await sync()).written).toEqual(['audit', 'crm-sync', 'send-welcome']);
    expect((await sync()).written).toEqual([]);
    const changed = subscribe(signedUp, { kind: 'audit', concurrencyKey: 'userId', deadlineMs: 60_000 });
    const again = await syncSubscriptions(t.db, new JobRegistry([welcome, crm, changed]), { schema: t.schema });
    expect(again.written).toEqual(['audit']);
    const row = (
      await t.admin.query(`select deadline_ms, where_json from "${t.schema}".subscriptions where kind = 'audit'`)
    ).rows[0];
    expect(Number(row.deadline_ms)).toBe(60_000);
  });

  it('publish writes the event and one job per matching subscriber in ONE statement, with each subscription’s options', async () => {
    await clean();
    await sync();
    const result = await q.publish(t.db.db, signedUp, ada);
    expect(result).toMatchObject({ duplicate: false, subscribers: 3 });
    expect(result.jobs.map((j) => [j.kind, j.queue]).sort()).toEqual([
      ['audit', 'default'],
      ['crm-sync', 'crm'],
      ['send-welcome', 'emails'],
    ]);
    expect(await jobs()).toEqual([
      expect.objectContaining({
        kind: 'audit',
        queue: 'default',
        concurrency_key: 'u1',
        has_deadline: true,
        event: result.eventId,
      }),
      expect.objectContaining({
        kind: 'crm-sync',
        queue: 'crm',
        priority: 7,
        max_attempts: 3,
        ordering_key: 'u1',
        destination: 'ada@example.com',
        has_deadline: false,
        event: result.eventId,
      }),
      expect.objectContaining({ kind: 'send-welcome', queue: 'emails', max_attempts: 5, event: result.eventId }),
    ]);
    // The where-filter is evaluated in the statement: a free plan gets no crm-sync job.
    const free = await q.publish(t.db.db, signedUp, bob);
    expect(free.jobs.map((j) => j.kind).sort()).toEqual(['audit', 'send-welcome']);
    expect(await count('event_deliveries')).toBe(5);
  });

  if (testDriver() !== 'neon-http') {
    it("in the caller's transaction: a rollback leaves no event and no job; a commit leaves both", async () => {
      await clean();
      await sync();
      await expect(
        t.db.db.transaction(async (tx) => {
          await q.publish(tx, signedUp, ada);
          throw new Error('business write failed');
        }),
      ).rejects.toThrow('business write failed');
      expect([await count('events'), await count('jobs'), await count('event_deliveries')]).toEqual([0, 0, 0]);
      const committed = await t.db.db.transaction(async (tx) => q.publish(tx, signedUp, ada));
      expect(committed.jobs).toHaveLength(3);
      expect([await count('events'), await count('jobs')]).toEqual([1, 3]);
    });
  } else {
    it("in the caller's batch: a failing batch leaves no event and no job; one that commits leaves both", async () => {
      await clean();
      await sync();
      const db = t.db.db as unknown as NeonHttpDatabase;
      const failing = q.preparePublish(signedUp, ada);
      await expect(
        db.batch([...failing.statements.map((s) => db.execute(s)), db.execute(sql`select 1 / 0`)] as never),
      ).rejects.toThrow();
      expect([await count('events'), await count('jobs')]).toEqual([0, 0]);
      const p = q.preparePublish(signedUp, ada, { dedupeKey: 'signup:u1' });
      const [, raw] = (await db.batch([
        db.execute(sql`select 1`),
        ...p.statements.map((s) => db.execute(s)),
      ] as never)) as unknown[];
      const result = p.read([raw]);
      expect(result).toMatchObject({ duplicate: false, subscribers: 3 });
      expect(result.jobs).toHaveLength(3);
      expect([await count('events'), await count('jobs')]).toEqual([1, 3]);
    });
  }

  it('a dedupe key makes a retried publish write nothing twice, and returns the first event', async () => {
    await clean();
    await sync();
    const first = await q.publish(t.db.db, signedUp, ada, { dedupeKey: 'signup:u1' });
    const retried = await q.publish(t.db.db, signedUp, ada, { dedupeKey: 'signup:u1' });
    expect(retried).toEqual({ eventId: first.eventId, duplicate: true, subscribers: 3, jobs: [] });
    expect([await count('events'), await count('jobs')]).toEqual([1, 3]);
    // Another event name may use the same key.
    const other = defineEvent({ name: 'user.deleted', schema: z.object({ userId: z.string() }) });
    expect((await q.publish(t.db.db, other, { userId: 'u1' }, { dedupeKey: 'signup:u1' })).duplicate).toBe(false);
  });

  it('an event no one subscribes to is kept and flagged (subscribers 0), and listed as such', async () => {
    await clean();
    const lonely = defineEvent({ name: 'invoice.paid', schema: z.object({ id: z.number() }) });
    const result = await q.publish(t.db.db, lonely, { id: 1 });
    expect(result).toMatchObject({ duplicate: false, subscribers: 0, jobs: [] });
    const listed = await listEvents(t.db, { schema: t.schema, unsubscribed: true });
    expect(listed.map((e) => [e.name, e.subscribers, e.deliveries])).toEqual([['invoice.paid', 0, 0]]);
    await q.publish(t.db.db, lonely, { id: 2 });
    const report = await runMaintenance(t.db, { schema: t.schema });
    expect(report.unsubscribedEvents.map((e) => [e.name, e.count])).toEqual([['invoice.paid', 2]]);
  });

  it('a retired subscription gets no job; its row stays; a sync makes it active again', async () => {
    await clean();
    await sync();
    expect(await retireSubscriptions(t.db.executor, t.schema, { kinds: ['audit'] })).toEqual(['audit']);
    const result = await q.publish(t.db.db, signedUp, ada);
    expect(result.jobs.map((j) => j.kind).sort()).toEqual(['crm-sync', 'send-welcome']);
    expect(result.subscribers).toBe(2);
    expect(await count('subscriptions')).toBe(3);
    expect((await sync()).written).toEqual(['audit']);
    expect((await q.publish(t.db.db, signedUp, ada)).jobs).toHaveLength(3);
  });

  it('replay by time range gives a subscriber the events it missed, once: a second replay writes nothing', async () => {
    await clean();
    await t.admin.query(`truncate "${t.schema}".jobs`);
    // Events published before crm-sync subscribed.
    await syncSubscriptions(t.db, new JobRegistry([welcome]), { schema: t.schema });
    const early = await q.publish(t.db.db, signedUp, ada);
    await q.publish(t.db.db, signedUp, bob);
    await sync();
    const from = new Date(Date.now() - 3_600_000);
    const to = new Date(Date.now() + 1_000);
    const replayed = await replayEvents(t.db, { schema: t.schema, subscription: 'crm-sync', from, to });
    // Only ada is pro: bob's event does not match crm-sync's filter.
    expect(replayed.map((d) => [d.eventId, d.kind])).toEqual([[early.eventId, 'crm-sync']]);
    expect(await replayEvents(t.db, { schema: t.schema, subscription: 'crm-sync', from, to })).toEqual([]);
    // Events outside the range are left alone.
    const past = await replayEvents(t.db, {
      schema: t.schema,
      subscription: 'audit',
      from,
      to: new Date(from.getTime() + 1),
    });
    expect(past).toEqual([]);
    const event = await getEvent(t.db, early.eventId as string, { schema: t.schema });
    expect(event?.jobs.map((j) => [j.subscription, j.state])).toEqual([
      ['crm-sync', 'queued'],
      ['send-welcome', 'queued'],
    ]);
  });

  it('replay names a subscription that does not exist, or is retired, instead of replaying nothing', async () => {
    await clean();
    await syncSubscriptions(t.db, new JobRegistry([welcome]), { schema: t.schema });
    const from = new Date(Date.now() - 3_600_000);
    await expect(replayEvents(t.db, { schema: t.schema, subscription: 'crm-synk', from })).rejects.toThrow(
      /no subscription crm-synk \(skiplock events subscriptions lists them\)/,
    );
    await retireSubscriptions(t.db.executor, t.schema, { kinds: ['send-welcome'] });
    await expect(replayEvents(t.db, { schema: t.schema, subscription: 'send-welcome', from })).rejects.toThrow(
      /subscription send-welcome is retired/,
    );
  });

  it('reconcile fills in a new subscription for events published around its activation, once; not older ones', async () => {
    await clean();
    await t.admin.query(`truncate "${t.schema}".jobs`);
    await syncSubscriptions(t.db, new JobRegistry([welcome]), { schema: t.schema });
    const old = await q.publish(t.db.db, signedUp, ada);
    await t.admin.query(`update "${t.schema}".events set published_at = now() - interval '1 hour' where id = $1`, [
      old.eventId,
    ]);
    const recent = await q.publish(t.db.db, signedUp, ada);
    // audit becomes active a minute after `recent` was published: as if its publish had not seen it.
    await syncSubscriptions(t.db, new JobRegistry([welcome, audit]), {
      schema: t.schema,
      now: new Date(Date.now() + 60_000),
    });
    const request = { marginMs: 5 * 60_000, horizonMs: 3_600_000, limit: 100, now: new Date(Date.now() + 61_000) };
    const filled = await reconcileDeliveries(t.db.executor, t.schema, request);
    expect(filled.map((d) => [d.eventId, d.kind])).toEqual([[recent.eventId, 'audit']]);
    expect(await reconcileDeliveries(t.db.executor, t.schema, request)).toEqual([]);
    // Past its horizon a subscription is no longer looked at.
    expect(
      await reconcileDeliveries(t.db.executor, t.schema, {
        ...request,
        horizonMs: 1_000,
        now: new Date(Date.now() + 3_600_000),
      }),
    ).toEqual([]);
  });

  if (testDriver() !== 'neon-http') {
    it('a publish whose snapshot predates a new subscription misses it; the reconcile gives it the job, once', async () => {
      await clean();
      await t.admin.query(`truncate "${t.schema}".jobs`);
      await syncSubscriptions(t.db, new JobRegistry([welcome]), { schema: t.schema });
      let synced: Promise<unknown> | undefined;
      // A repeatable-read transaction takes its snapshot, then audit subscribes on another
      // connection and commits, then the transaction publishes: its statement cannot see audit.
      const missed = await t.db.db.transaction(
        async (tx) => {
          await tx.execute(sql`select 1`);
          synced = syncSubscriptions(openDbOnce(), new JobRegistry([welcome, audit]), { schema: t.schema });
          await synced;
          return q.publish(tx, signedUp, ada);
        },
        { isolationLevel: 'repeatable read' },
      );
      expect(missed.jobs.map((j) => j.kind)).toEqual(['send-welcome']);
      const report = await runMaintenance(t.db, { schema: t.schema });
      expect(report.reconciledDeliveries).toBe(1);
      expect(
        (await getEvent(t.db, missed.eventId as string, { schema: t.schema }))?.jobs.map((j) => j.subscription),
      ).toEqual(['audit', 'send-welcome']);
      expect((await runMaintenance(t.db, { schema: t.schema })).reconciledDeliveries).toBe(0);
    });
  }

  it('maintenance prunes events past their retention with their deliveries, not their jobs', async () => {
    await clean();
    await t.admin.query(`truncate "${t.schema}".jobs`);
    await sync();
    const old = await q.publish(t.db.db, signedUp, ada);
    await q.publish(t.db.db, signedUp, bob);
    await t.admin.query(`update "${t.schema}".events set published_at = now() - interval '8 days' where id = $1`, [
      old.eventId,
    ]);
    expect(
      await pruneEvents(t.db.executor, t.schema, { before: new Date(Date.now() - 7 * 86_400_000), limit: 100 }),
    ).toBe(1);
    expect([await count('events'), await count('event_deliveries'), await count('jobs')]).toEqual([1, 2, 5]);
    await t.admin.query(`update "${t.schema}".events set published_at = now() - interval '2 days'`);
    const report = await runMaintenance(t.db, { schema: t.schema, eventRetentionMs: 86_400_000 });
    expect(report.prunedEvents).toBe(1);
    expect(await count('events')).toBe(0);
  });

  it('concurrent publishes on separate connections: every event fans out to every subscriber exactly once', async () => {
    await clean();
    await t.admin.query(`truncate "${t.schema}".jobs`);
    await sync();
    const conns = Array.from({ length: 4 }, () => openDb());
    try {
      const enqueuers = conns.map(() => createEnqueuer({ schema: t.schema }));
      // 4 connections × 10 publishes, each key published twice (a retry racing its original).
      await Promise.all(
        conns.flatMap((c, i) =>
          Array.from({ length: 10 }, (_, n) =>
            (enqueuers[i] as ReturnType<typeof createEnqueuer>).publish(
              c.db,
              signedUp,
              { ...ada, userId: `u${n}` },
              {
                dedupeKey: `k${(i % 2) * 10 + n}`,
              },
            ),
          ),
        ),
      );
    } finally {
      await Promise.all(conns.map((c) => c.close()));
    }
    expect(await count('events')).toBe(20);
    const perEvent = (
      await t.admin.query(
        `select e.id, count(d.*)::int as n, count(distinct d.subscription)::int as subs from "${t.schema}".events e
          left join "${t.schema}".event_deliveries d on d.event_id = e.id group by e.id`,
      )
    ).rows;
    expect(perEvent.every((r) => r.n === 3 && r.subs === 3)).toBe(true);
    expect(await count('jobs')).toBe(60);
  });
});
