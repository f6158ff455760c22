import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DatabaseError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, subscribe } from '../../core/events.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { runMaintenance } from '../../core/maintenance.js';
import { createWorker } from '../../core/worker/index.js';
import { queryRows } from '../../db/execute.js';
import { ManualClock } from '../../testing/clock.js';
import { databaseUrl, openDb, setupTestSchema, type TestContext, testDriver } from '../helpers/db.js';

let t: TestContext;
const suffix = randomBytes(3).toString('hex');
const roles = { worker: `sl_worker_${suffix}`, enqueuer: `sl_enqueuer_${suffix}` };
const PASSWORD = 'role-pw-0123';

beforeAll(async () => {
  t = await setupTestSchema('guards');
  // docs/roles.sql, for this test's schema and role names.
  const script = readFileSync('docs/roles.sql', 'utf8')
    .replaceAll('"skiplock"', `"${t.schema}"`)
    .replaceAll('skiplock_worker', roles.worker)
    .replaceAll('skiplock_enqueuer', roles.enqueuer)
    .replace(/'change-me-[a-z]+'/g, `'${PASSWORD}'`)
    .replace("statement_timeout = '10s'", "statement_timeout = '500ms'");
  await t.admin.query(script);
});
afterAll(async () => {
  await t.close();
  const admin = (await import('../helpers/db.js')).openAdminPool();
  for (const role of Object.values(roles)) await admin.query(`drop role if exists ${role}`).catch(() => {});
  await admin.end();
});

/** A connection as `role` through the driver under test (no statement_timeout sent: the role's applies). */
function openAs(role: string) {
  const url = new URL(databaseUrl());
  url.username = role;
  url.password = PASSWORD;
  return openDb({ connectionString: url.toString(), statementTimeoutMs: 0 });
}

const task = defineJob({ kind: 'task', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handler: () => {} });

describe(`least-privilege roles from docs/roles.sql (${testDriver()})`, () => {
  it('the enqueue role enqueues in every dedupe mode but cannot read leases or errors, claim or delete', async () => {
    const db = openAs(roles.enqueuer);
    try {
      const q = createEnqueuer({ schema: t.schema });
      expect((await q.enqueue(db, task, { n: 1 })).outcome).toBe('inserted');
      const a = await q.enqueue(db, task, { n: 2 }, { dedupe: { key: 'k' } });
      expect(await q.enqueue(db, task, { n: 3 }, { dedupe: { key: 'k' } })).toEqual({
        id: a.id,
        outcome: 'deduplicated',
      });
      const r = await q.enqueue(db, task, { n: 4 }, { dedupe: { key: 'r', mode: 'replace' } });
      expect(await q.enqueue(db, task, { n: 5 }, { dedupe: { key: 'r', mode: 'replace' } })).toEqual({
        id: r.id,
        outcome: 'replaced',
      });
      await q.enqueue(db, task, { n: 6 }, { dedupe: { key: 'w', mode: 'window', windowMs: 60_000 } });
      // Ordering keys: the second job of a key is parked behind the first.
      await q.enqueue(db, task, { n: 7 }, { orderingKey: 'order-1' });
      await q.enqueue(db, task, { n: 8 }, { orderingKey: 'order-1' });
      const parked = await t.admin.query(
        `select count(*)::int as n from "${t.schema}".jobs where ordering_key = 'order-1' and run_at = 'infinity'`,
      );
      expect(parked.rows[0].n).toBe(1);
      await t.admin.query(`delete from "${t.schema}".jobs where ordering_key = 'order-1'`); // the worker tests count the rest
      // Dependencies: a flow, and a child after an existing job (the parent's row takes its id).
      const flow = await q.enqueueFlow(db, {
        first: task.with({ n: 9 }),
        next: task.with({ n: 10 }, { after: ['first'] }),
      });
      const late = await q.enqueue(db, task, { n: 11 }, { after: [flow.first.id] });
      const waiting = await t.admin.query(
        `select id::text from "${t.schema}".jobs where after is not null and run_at = 'infinity' order by id`,
      );
      expect(waiting.rows.map((r) => r.id)).toEqual([flow.next.id, late.id]);
      await t.admin.query(`delete from "${t.schema}".jobs where id = any($1::bigint[])`, [
        [flow.first.id, flow.next.id, late.id],
      ]);
      for (const forbidden of [
        sql`select lease_token, last_error from ${sql.identifier(t.schema)}.jobs`,
        sql`update ${sql.identifier(t.schema)}.jobs set state = 'running'`,
        sql`delete from ${sql.identifier(t.schema)}.jobs`,
      ]) {
        const error = await queryRows(db.executor, forbidden, t.schema).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseError);
        expect((error as DatabaseError).sqlState).toBe('42501');
      }
    } finally {
      await db.close();
    }
  });

  it('the worker role runs invocations and maintenance but cannot insert jobs', async () => {
    const db = openAs(roles.worker);
    try {
      const summary = await createWorker({ db, schema: t.schema, jobs: [task], logger: silentLogger }).runInvocation({
        remainingMs: 10_000,
      });
      expect(summary).toMatchObject({ stoppedBecause: 'drained', completed: 4 });
      const report = await runMaintenance(db, { schema: t.schema, completedRetentionMs: 0 });
      expect(report.prunedCompleted).toBe(4);
      // A worker that deletes completed jobs also writes their per-minute counts.
      await t.admin.query(
        `insert into "${t.schema}".jobs (kind, payload) values ('task', '{"n": 1}'), ('task', '{"n": 2}')`,
      );
      const deleting = createWorker({
        db,
        schema: t.schema,
        jobs: [task],
        logger: silentLogger,
        completedJobs: 'delete',
      });
      expect(await deleting.runInvocation({ remainingMs: 10_000 })).toMatchObject({
        completed: 2,
        stoppedBecause: 'drained',
      });
      const left = await t.admin.query(
        `select (select count(*)::int from "${t.schema}".jobs) as jobs,
           (select sum(completed)::int from "${t.schema}".completed_counts) as counted`,
      );
      expect(left.rows[0]).toEqual({ jobs: 0, counted: 2 });
      const error = await createEnqueuer({ schema: t.schema })
        .enqueue(db, task, { n: 9 })
        .catch((e: unknown) => e);
      expect((error as DatabaseError).sqlState).toBe('42501');
    } finally {
      await db.close();
    }
  });
});

describe(`least-privilege roles and durable steps (${testDriver()})`, () => {
  it('the worker role runs steps and takes signals; the enqueue role sends them, waking the waiting job', async () => {
    const worker = openAs(roles.worker);
    const enqueuer = openAs(roles.enqueuer);
    try {
      const waits = defineJob({
        kind: 'waits',
        payload: z.object({ n: z.number() }),
        timeoutMs: 1_000,
        handler: async (p, ctx) => {
          const first = await ctx.step('first', () => p.n);
          const got = await ctx.waitForSignal<number>('go', { key: `go:${p.n}`, timeoutMs: 3_600_000 });
          return got.timedOut ? null : first + got.payload;
        },
      });
      const q = createEnqueuer({ schema: t.schema });
      const { id } = await q.enqueue(enqueuer, waits, { n: 1 });
      const run = () =>
        createWorker({ db: worker, schema: t.schema, jobs: [waits], logger: silentLogger }).runInvocation({
          remainingMs: 10_000,
        });
      expect(await run()).toMatchObject({ suspended: 1 });
      expect(await q.signal(enqueuer, 'go:1', 41)).toMatchObject({ woken: 1 });
      expect(await run()).toMatchObject({ completed: 1 });
      const row = await t.admin.query(`select state, result from "${t.schema}".jobs where id = $1`, [id]);
      expect(row.rows[0]).toEqual({ state: 'completed', result: 42 });
      expect((await runMaintenance(worker, { schema: t.schema, completedRetentionMs: 0 })).prunedCompleted).toBe(1);
    } finally {
      await worker.close();
      await enqueuer.close();
    }
  });
});

describe(`database-side guards (${testDriver()})`, () => {
  it('a claim blocked on a lock is cut off by statement_timeout: the invocation returns, it does not hang', async () => {
    const db = openAs(roles.worker);
    const locker = await t.admin.connect();
    try {
      await locker.query('begin');
      await locker.query(`lock table "${t.schema}".jobs in access exclusive mode`);
      // The invocation's clock stands still: its budget never runs out, so only the database's
      // statement_timeout (the role's 500 ms) can end the blocked claim.
      const clock = new ManualClock();
      const summary = await createWorker({
        db,
        schema: t.schema,
        jobs: [task],
        logger: silentLogger,
        clock,
      }).runInvocation({
        remainingMs: 30_000,
      });
      expect(summary).toMatchObject({ stoppedBecause: 'error', errorCode: '57014', claimed: 0, durationMs: 0 });
      expect(summary.error).toMatch(/statement timeout/);
    } finally {
      await locker.query('rollback');
      locker.release();
      await db.close();
    }
  });

  it('a session idle in a transaction for the whole run does not stop claiming', async () => {
    const idle = await t.admin.connect();
    try {
      await idle.query('begin');
      await idle.query('select txid_current()'); // holds an xid and a snapshot, like a forgotten transaction
      await createEnqueuer({ schema: t.schema }).enqueueMany(
        t.db,
        Array.from({ length: 50 }, (_, n) => task.with({ n })),
      );
      const summary = await createWorker({
        db: t.db,
        schema: t.schema,
        jobs: [task],
        logger: silentLogger,
        concurrency: 10,
      }).runInvocation({
        remainingMs: 30_000,
      });
      expect(summary).toMatchObject({ claimed: 50, completed: 50, stoppedBecause: 'drained' });
    } finally {
      await idle.query('rollback');
      idle.release();
    }
  });
});

describe(`least-privilege roles and events (${testDriver()})`, () => {
  it('the enqueue role publishes (a dedupe key held too); the worker role records subscriptions, prunes events and skips the reconcile it may not write', async () => {
    const placed = defineEvent({ name: 'order.placed', schema: z.object({ n: z.number() }) });
    const ship = subscribe(placed, { kind: 'ship', timeoutMs: 1_000, handler: () => {} });
    const worker = openAs(roles.worker);
    const enqueuer = openAs(roles.enqueuer);
    try {
      // The worker's first invocation writes its subscriber's subscription.
      await createWorker({ db: worker, schema: t.schema, jobs: [ship], logger: silentLogger }).runInvocation({
        remainingMs: 10_000,
      });
      const q = createEnqueuer({ schema: t.schema });
      const first = await q.publish(enqueuer, placed, { n: 1 }, { dedupeKey: 'o-1' });
      expect(first.jobs.map((j) => j.kind)).toEqual(['ship']);
      expect(await q.publish(enqueuer, placed, { n: 1 }, { dedupeKey: 'o-1' })).toMatchObject({
        eventId: first.eventId,
        duplicate: true,
      });
      expect(
        await createWorker({ db: worker, schema: t.schema, jobs: [ship], logger: silentLogger }).runInvocation({
          remainingMs: 10_000,
        }),
      ).toMatchObject({ completed: 1 });
      await t.admin.query(`update "${t.schema}".events set published_at = now() - interval '30 days'`);
      const report = await runMaintenance(worker, { schema: t.schema });
      expect(report).toMatchObject({ prunedEvents: 1, reconciledDeliveries: null });
    } finally {
      await worker.close();
      await enqueuer.close();
    }
  });
});
