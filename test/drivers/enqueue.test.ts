import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { describe, expect, it } from 'vitest';
import type { EnqueueTarget } from '../../core/enqueue.js';
import { claimJobs } from '../../db/statements/claim.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';
import { countStatements } from '../helpers/statements.js';

// The driver smoke set (test/drivers runs on every driver; test/core on pg only): enqueue through
// the driver under test — in the caller's transaction (on neon-http, the batch the docs describe),
// many jobs in one statement, and the same dedupe key from several pools at once.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('drivers_enqueue', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const count = async (table: string) =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".${table}`)).rows[0].n as number;
const orderIds = async () =>
  (await t.admin.query(`select id from "${t.schema}".orders order by id`)).rows.map((r) => r.id as number);
const claimAll = () =>
  claimJobs(t.db.executor, t.schema, {
    leases: [
      { kind: 'send-email', leaseMs: 10_000 },
      { kind: 'sync-profile', leaseMs: 10_000 },
    ],
    limit: 100,
    invocationId: 'smoke',
  });
/** The caller's own table, written in the same transaction as the enqueue. */
const ordersTable = async () => {
  await t.admin.query(`create table if not exists "${t.schema}".orders (id int primary key)`);
  await t.admin.query(`truncate "${t.schema}".orders`);
  return sql`${sql.identifier(t.schema)}.orders`;
};
const email = { to: 'ada@example.com', subject: 'Welcome' };

describe(`enqueue in the caller's transaction (${testDriver()})`, () => {
  if (testDriver() !== 'neon-http') {
    it('with the business write: invisible to claimers until it commits; a rollback leaves neither; a commit both', async () => {
      expect(t.db.interactiveTransactions).toBe(true);
      const orders = await ordersTable();
      await expect(
        t.db.db.transaction(async (tx) => {
          await tx.execute(sql`insert into ${orders} (id) values (1)`);
          await q.enqueue(tx, sendEmail, { ...email, subject: 'rolled back' });
          throw new Error('business write failed');
        }),
      ).rejects.toThrow('business write failed');
      expect([await orderIds(), await count('jobs')]).toEqual([[], 0]);

      let seenBeforeCommit: string[] = ['not claimed yet'];
      const committed = await t.db.db.transaction(async (tx) => {
        await tx.execute(sql`insert into ${orders} (id) values (2)`);
        const result = await q.enqueue(tx, sendEmail, { ...email, subject: 'committed' });
        // A claim on another connection of the pool does not see the uncommitted job.
        seenBeforeCommit = (await claimAll()).jobs.map((j) => j.id);
        return result;
      });
      expect(seenBeforeCommit).toEqual([]);
      expect(committed.outcome).toBe('inserted');
      expect(await orderIds()).toEqual([2]);
      expect((await claimAll()).jobs.map((j) => j.id)).toEqual([committed.id]);
    });
  } else {
    it('with the business write in one batch: a failing batch writes neither; a batch that commits writes both', async () => {
      expect(t.db.interactiveTransactions).toBe(false);
      const orders = await ordersTable();
      const db = t.db.db as unknown as NeonHttpDatabase;
      const failing = q.prepareEnqueue([sendEmail.with({ ...email, subject: 'rolled back' })]);
      await expect(
        db.batch([
          db.execute(sql`insert into ${orders} (id) values (1)`),
          ...failing.statements.map((s) => db.execute(s)),
          db.execute(sql`select 1 / 0`),
        ] as never),
      ).rejects.toThrow();
      expect([await orderIds(), await count('jobs')]).toEqual([[], 0]);

      const ok = q.prepareEnqueue([sendEmail.with({ ...email, subject: 'committed' })]);
      const raw = await db.batch([
        db.execute(sql`insert into ${orders} (id) values (2)`),
        ...ok.statements.map((s) => db.execute(s)),
      ] as never);
      const [result] = ok.read((raw as unknown[]).slice(1));
      expect(result?.outcome).toBe('inserted');
      expect(await orderIds()).toEqual([2]);
      expect((await claimAll()).jobs.map((j) => j.id)).toEqual([result?.id]);
    });
  }
});

describe(`enqueue many (${testDriver()})`, () => {
  it('writes N jobs of several kinds in one statement, with results aligned to the input', async () => {
    const requests = Array.from({ length: 200 }, (_, i) =>
      i % 2 === 0
        ? sendEmail.with({ to: `u${i}@example.com`, subject: `s${i}` })
        : syncProfile.with({ userId: i, name: `n${i}` }, { priority: 5, dedupe: { key: `user-${i}` } }),
    );
    const { result, statements } = await countStatements(testDriver(), () => q.enqueueMany(t.db, requests));
    expect(statements).toBe(1);
    expect(result.map((r) => r.outcome)).toEqual(Array(200).fill('inserted'));
    const { rows } = await t.admin.query(`select id::text, kind, priority, payload from "${t.schema}".jobs`);
    const byId = new Map(rows.map((r) => [r.id as string, r]));
    result.forEach((r, i) => {
      expect(byId.get(r.id)).toEqual({
        id: r.id,
        kind: i % 2 === 0 ? 'send-email' : 'sync-profile',
        priority: i % 2 === 0 ? 0 : 5,
        payload: i % 2 === 0 ? { to: `u${i}@example.com`, subject: `s${i}`, body: '' } : { userId: i, name: `n${i}` },
      });
    });
  });

  it('a row the database refuses writes none of the call, whichever target it is given', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(`create or replace function ${s}.refuse_marked() returns trigger language plpgsql as $$
      begin
        if new.payload->>'name' = 'refuse-me' then raise exception 'refused by the test trigger'; end if;
        return new;
      end $$`);
    await t.admin.query(
      `create trigger refuse_marked before insert on ${s}.jobs for each row execute function ${s}.refuse_marked()`,
    );
    try {
      const waiting = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'old' }, { dedupe: { key: 'r' } });
      const targets: [string, (run: (target: EnqueueTarget) => Promise<unknown>) => Promise<unknown>][] = [
        ['SkiplockDb', (run) => run(t.db)],
        ['Drizzle database', (run) => run(t.db.db)],
      ];
      if (t.db.interactiveTransactions) targets.push(['Drizzle transaction', (run) => t.db.db.transaction(run)]);
      expect(targets).toHaveLength(testDriver() === 'neon-http' ? 2 : 3);
      for (const [label, withTarget] of targets) {
        const error = await withTarget((target) =>
          q.enqueueMany(target, [
            syncProfile.with({ userId: 1, name: 'new' }, { dedupe: { key: 'r', mode: 'replace' } }),
            sendEmail.with(email),
            syncProfile.with({ userId: 2, name: 'refuse-me' }),
          ]),
        ).catch((e: unknown) => e);
        expect((error as Error).message, label).toMatch(/refused by the test trigger/);
        const { rows } = await t.admin.query(`select id::text, payload->>'name' as name from ${s}.jobs`);
        expect(rows, label).toEqual([{ id: waiting.id, name: 'old' }]);
      }
    } finally {
      await t.admin.query(`drop trigger refuse_marked on ${s}.jobs; drop function ${s}.refuse_marked()`);
    }
  });

  it('50 enqueues at once from 5 pools with one dedupe key leave exactly one job; the others get its id', async () => {
    const pools = Array.from({ length: 5 }, () => openDb({ max: 10 }));
    try {
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          q.enqueue(pools[i % pools.length]!, syncProfile, { userId: 7, name: `v${i}` }, { dedupe: { key: 'user-7' } }),
        ),
      );
      expect(await count('jobs')).toBe(1);
      expect(results.filter((r) => r.outcome === 'inserted')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'deduplicated')).toHaveLength(49);
      expect(new Set(results.map((r) => r.id)).size).toBe(1);
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });
});
