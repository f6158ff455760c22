import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  InvalidOptionsError,
  PayloadTooLargeError,
  PayloadValidationError,
  UnknownKindError,
} from '../../base/errors.js';
import type { EnqueueTarget } from '../../core/enqueue.js';
import { defineJob, JobRegistry } from '../../core/jobs.js';
import { claimJobs } from '../../db/statements/claim.js';
import { releaseJobs, settleJobs } from '../../db/statements/settle.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';
import { countStatements } from '../helpers/statements.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('enqueue', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema, 4096);
});

const count = async (where = 'true') =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where ${where}`)).rows[0].n as number;

const claimAll = (limit = 100) =>
  claimJobs(t.db.executor, t.schema, {
    leases: [
      { kind: 'send-email', leaseMs: 10_000 },
      { kind: 'sync-profile', leaseMs: 10_000 },
    ],
    limit,
    invocationId: 'test',
  });

describe(`enqueue (${testDriver()})`, () => {
  it('writes a job with the kind defaults and options, claimable at once', async () => {
    const result = await q.enqueue(t.db, sendEmail, { to: 'a@example.com', subject: 'hi' }, { correlationId: 'req-1' });
    expect(result.outcome).toBe('inserted');
    const { rows } = await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [result.id]);
    expect(rows[0]).toMatchObject({
      kind: 'send-email',
      queue: 'emails',
      state: 'queued',
      attempt: 0,
      max_attempts: 3,
      payload: { to: 'a@example.com', subject: 'hi', body: '' },
      correlation_id: 'req-1',
    });
    const claim = await claimAll();
    expect(claim.jobs.map((j) => j.id)).toEqual([result.id]);
  });

  it('a job enqueued in a transaction that rolls back never exists; committed, it is claimable', async () => {
    if (t.db.interactiveTransactions) {
      await expect(
        t.db.db.transaction(async (tx) => {
          await q.enqueue(tx, sendEmail, { to: 'a@example.com', subject: 'rolled back' });
          throw new Error('business write failed');
        }),
      ).rejects.toThrow('business write failed');
      expect(await count()).toBe(0);
      const committed = await t.db.db.transaction(async (tx) =>
        q.enqueue(tx, sendEmail, { to: 'a@example.com', subject: 'committed' }),
      );
      expect((await claimAll()).jobs.map((j) => j.id)).toEqual([committed.id]);
    } else {
      // neon-http has no interactive transactions: a batch is the transaction.
      const db = t.db.db as unknown as NeonHttpDatabase;
      const failing = q.prepareEnqueue([sendEmail.with({ to: 'a@example.com', subject: 'rolled back' })]);
      await expect(
        db.batch([...failing.statements.map((s) => db.execute(s)), db.execute(sql`select 1 / 0`)] as never),
      ).rejects.toThrow();
      expect(await count()).toBe(0);
      const ok = q.prepareEnqueue([sendEmail.with({ to: 'a@example.com', subject: 'committed' })]);
      const raw = await db.batch([db.execute(sql`select 1`), ...ok.statements.map((s) => db.execute(s))] as never);
      const [result] = ok.read((raw as unknown[]).slice(1));
      expect(result?.outcome).toBe('inserted');
      expect((await claimAll()).jobs.map((j) => j.id)).toEqual([result?.id]);
    }
  });

  it('an uncommitted enqueue is invisible to claimers until it commits', async () => {
    const client = await t.admin.connect();
    try {
      await client.query('begin');
      await client.query(`insert into "${t.schema}".jobs (kind, payload) values ('send-email', '{}')`);
      expect((await claimAll()).jobs).toHaveLength(0);
      await client.query('commit');
      expect((await claimAll()).jobs).toHaveLength(1);
    } finally {
      client.release();
    }
  });

  it('bulk: one call writes N jobs of several kinds, results aligned with the input', async () => {
    const requests = Array.from({ length: 500 }, (_, i) =>
      i % 2 === 0
        ? sendEmail.with({ to: `u${i}@example.com`, subject: `s${i}` })
        : syncProfile.with({ userId: i, name: `n${i}` }, { priority: 5 }),
    );
    const results = await q.enqueueMany(t.db, requests);
    expect(results).toHaveLength(500);
    expect(new Set(results.map((r) => r.id)).size).toBe(500);
    const { rows } = await t.admin.query(`select id::text, kind, payload from "${t.schema}".jobs`);
    const byId = new Map(rows.map((r) => [r.id, r]));
    results.forEach((r, i) => {
      const row = byId.get(r.id);
      expect(row.kind).toBe(i % 2 === 0 ? 'send-email' : 'sync-profile');
      expect(row.payload).toEqual(
        i % 2 === 0 ? { to: `u${i}@example.com`, subject: `s${i}`, body: '' } : { userId: i, name: `n${i}` },
      );
    });
  });

  it('the payload is stored as it was validated, nulls and nesting kept; key functions see it as stored; null options are none', async () => {
    const stamped = defineJob({
      kind: 'stamped',
      payload: z.object({
        at: z.date(),
        note: z.string().nullable(),
        nested: z.object({ list: z.array(z.number().nullable()) }),
      }),
      // Called with the stored form: the Date is ISO text by then.
      orderingKey: (p) => `key-${typeof p.at}-${p.nested.list.length}`,
      handler: async () => {},
    });
    const at = new Date('2026-11-26T12:00:00.000Z');
    const [keyed] = await q.enqueueMany(t.db, [stamped.with({ at, note: null, nested: { list: [1, null, 3] } })]);
    const plain = await q.enqueue(t.db, sendEmail, { to: 'n@example.com', subject: 'null options' }, null as never);
    const { rows } = await t.admin.query(
      `select id::text, payload, ordering_key, priority from "${t.schema}".jobs where id = any($1::bigint[]) order by id`,
      [[keyed?.id, plain.id]],
    );
    expect(rows).toEqual([
      {
        id: keyed?.id,
        payload: { at: at.toISOString(), note: null, nested: { list: [1, null, 3] } },
        ordering_key: 'key-string-3',
        priority: 0,
      },
      {
        id: plain.id,
        payload: { to: 'n@example.com', subject: 'null options', body: '' },
        ordering_key: null,
        priority: 0,
      },
    ]);
    await t.admin.query(`delete from "${t.schema}".jobs where id = any($1::bigint[])`, [[keyed?.id, plain.id]]);
  });

  it('a runAt a little in the past (clock skew) runs now', async () => {
    const { id } = await q.enqueue(
      t.db,
      sendEmail,
      { to: 'a@example.com', subject: 's' },
      { runAt: new Date(Date.now() - 60_000) },
    );
    expect((await claimAll()).jobs.map((j) => j.id)).toEqual([id]);
  });

  it('delayMs and runAt schedule on the database clock; scheduled jobs are not claimable yet', async () => {
    await q.enqueue(t.db, sendEmail, { to: 'a@example.com', subject: 'later' }, { delayMs: 60_000 });
    await q.enqueue(
      t.db,
      sendEmail,
      { to: 'a@example.com', subject: 'later' },
      { runAt: new Date(Date.now() + 3_600_000) },
    );
    expect(await count(`run_at > now() + interval '50 seconds'`)).toBe(2);
    expect((await claimAll()).jobs).toHaveLength(0);
  });

  describe('dedupe', () => {
    const concurrently = async (mode: 'skip' | 'replace' | 'window') => {
      const connections = Array.from({ length: 5 }, () => openDb({ max: 10 }));
      try {
        return await Promise.all(
          Array.from({ length: 50 }, (_, i) =>
            q.enqueue(
              connections[i % connections.length]!,
              syncProfile,
              { userId: 7, name: `v${i}` },
              { dedupe: mode === 'window' ? { key: 'user-7', mode, windowMs: 3_600_000 } : { key: 'user-7', mode } },
            ),
          ),
        );
      } finally {
        await Promise.all(connections.map((c) => c.close()));
      }
    };

    it('skip: 50 concurrent enqueues leave exactly one live job; the others get its id', async () => {
      const results = await concurrently('skip');
      expect(await count()).toBe(1);
      expect(results.filter((r) => r.outcome === 'inserted')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'deduplicated')).toHaveLength(49);
      expect(new Set(results.map((r) => r.id)).size).toBe(1);
    });

    it('skip: a running job holds the key; a finished one does not', async () => {
      const first = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'a' }, { dedupe: { key: 'k' } });
      await claimAll();
      const again = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'b' }, { dedupe: { key: 'k' } });
      expect(again).toEqual({ id: first.id, outcome: 'deduplicated' });
      await t.admin.query(`update "${t.schema}".jobs set state = 'completed', finished_at = now() where id = $1`, [
        first.id,
      ]);
      const fresh = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'c' }, { dedupe: { key: 'k' } });
      expect(fresh.outcome).toBe('inserted');
      expect(fresh.id).not.toBe(first.id);
    });

    it('replace: 50 concurrent enqueues leave one waiting job carrying one of the payloads', async () => {
      const results = await concurrently('replace');
      expect(await count()).toBe(1);
      expect(results.filter((r) => r.outcome === 'inserted')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'replaced')).toHaveLength(49);
      const { rows } = await t.admin.query(`select payload from "${t.schema}".jobs`);
      expect(rows[0].payload.name).toMatch(/^v\d+$/);
    });

    it('replace: the latest payload, run_at and priority win on the waiting job', async () => {
      const a = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'old' },
        { dedupe: { key: 'k', mode: 'replace' }, delayMs: 60_000 },
      );
      const b = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'new' },
        { dedupe: { key: 'k', mode: 'replace' }, priority: -5 },
      );
      expect(b).toEqual({ id: a.id, outcome: 'replaced' });
      const { rows } = await t.admin.query(`select payload, priority, run_at <= now() as due from "${t.schema}".jobs`);
      expect(rows).toEqual([{ payload: { userId: 1, name: 'new' }, priority: -5, due: true }]);
    });

    it('replace: a running job is not touched; the new state waits in a new job', async () => {
      const a = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'old' },
        { dedupe: { key: 'k', mode: 'replace' } },
      );
      const [claimed] = (await claimAll()).jobs;
      expect(claimed?.id).toBe(a.id);
      const before = (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [a.id])).rows[0];
      const b = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'new' },
        { dedupe: { key: 'k', mode: 'replace' } },
      );
      expect(b.outcome).toBe('inserted');
      expect(b.id).not.toBe(a.id);
      const after = (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [a.id])).rows[0];
      expect(after).toEqual(before);
    });

    it('replace: a running job that retries (or is released) does not collide with the newer waiting job', async () => {
      const a = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'old' },
        { dedupe: { key: 'k', mode: 'replace' } },
      );
      const [running] = (await claimAll()).jobs;
      const b = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'new' },
        { dedupe: { key: 'k', mode: 'replace' } },
      );
      expect(b.outcome).toBe('inserted');
      const settled = await settleJobs(t.db.executor, t.schema, [
        {
          id: a.id,
          leaseToken: running!.leaseToken,
          outcome: 'retry',
          delayMs: 0,
          error: { class: 'E', message: 'm' },
        },
      ]);
      expect(settled.map((x) => x.state)).toEqual(['queued']);
      // A third enqueue still replaces the newer, never-attempted job, not the retrying one.
      const c = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 1, name: 'newest' },
        { dedupe: { key: 'k', mode: 'replace' } },
      );
      expect(c).toEqual({ id: b.id, outcome: 'replaced' });
      // Both claimed, then given back unstarted: released rows do not collide either.
      const claimed = (await claimAll()).jobs;
      expect(claimed.map((j) => j.id).sort()).toEqual([a.id, b.id].sort());
      const released = await releaseJobs(
        t.db.executor,
        t.schema,
        claimed.map((j) => ({ id: j.id, leaseToken: j.leaseToken })),
      );
      expect(released.sort()).toEqual([a.id, b.id].sort());
    });

    it('window: 50 concurrent enqueues leave one job for the period, whatever its state', async () => {
      const results = await concurrently('window');
      expect(await count()).toBe(1);
      expect(results.filter((r) => r.outcome === 'inserted')).toHaveLength(1);
      await t.admin.query(`update "${t.schema}".jobs set state = 'completed', finished_at = now()`);
      const again = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 7, name: 'x' },
        { dedupe: { key: 'user-7', mode: 'window', windowMs: 3_600_000 } },
      );
      expect(again).toEqual({ id: results[0]?.id, outcome: 'deduplicated' });
      // Move the existing job into the previous period: the current period is free again.
      await t.admin.query(`update "${t.schema}".jobs set dedupe_window = dedupe_window - interval '1 hour'`);
      const next = await q.enqueue(
        t.db,
        syncProfile,
        { userId: 7, name: 'y' },
        { dedupe: { key: 'user-7', mode: 'window', windowMs: 3_600_000 } },
      );
      expect(next.outcome).toBe('inserted');
    });

    it('dedupe inside one bulk call: the second row with a key is deduplicated against the first', async () => {
      const results = await q.enqueueMany(t.db, [
        syncProfile.with({ userId: 1, name: 'a' }, { dedupe: { key: 'same' } }),
        syncProfile.with({ userId: 1, name: 'b' }, { dedupe: { key: 'same' } }),
        syncProfile.with({ userId: 2, name: 'r1' }, { dedupe: { key: 'r', mode: 'replace' } }),
        syncProfile.with({ userId: 2, name: 'r2' }, { dedupe: { key: 'r', mode: 'replace' } }),
      ]);
      expect(results.map((r) => r.outcome)).toEqual(['inserted', 'deduplicated', 'replaced', 'inserted']);
      expect(results[1]?.id).toBe(results[0]?.id);
      expect(results[2]?.id).toBe(results[3]?.id);
      expect(await count()).toBe(2);
      const { rows } = await t.admin.query(`select payload from "${t.schema}".jobs where dedupe_key = 'r'`);
      expect(rows[0].payload.name).toBe('r2');
    });
  });

  describe('a bulk call is one transaction', () => {
    const replaceRow = (name: string, key: string) =>
      syncProfile.with({ userId: 1, name }, { dedupe: { key, mode: 'replace' } });

    it('replace rows beside plain rows: a plain row refused by the database writes none, not even the replace rows', async () => {
      const s = `"${t.schema}"`;
      await t.admin.query(`create function ${s}.refuse_marked() returns trigger language plpgsql as $$
        begin
          if new.payload->>'name' = 'refuse-me' then raise exception 'refused by the test trigger'; end if;
          return new;
        end $$`);
      await t.admin.query(
        `create trigger refuse_marked before insert on ${s}.jobs for each row execute function ${s}.refuse_marked()`,
      );
      try {
        const waiting = await q.enqueue(
          t.db,
          syncProfile,
          { userId: 1, name: 'old' },
          { dedupe: { key: 'r', mode: 'replace' } },
        );
        const targets: [string, (run: (target: EnqueueTarget) => Promise<unknown>) => Promise<unknown>][] = [
          ['SkiplockDb', (run) => run(t.db)],
          ['Drizzle database', (run) => run(t.db.db)],
        ];
        if (t.db.interactiveTransactions) {
          targets.push(['Drizzle transaction', (run) => t.db.db.transaction((tx) => run(tx))]);
        }
        for (const [label, withTarget] of targets) {
          const error = await withTarget((target) =>
            q.enqueueMany(target, [
              replaceRow('new', 'r'),
              replaceRow('fresh', 'r2'),
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

    it('in one statement, with no transaction around it, whatever the dedupe modes', async () => {
      const plain = [sendEmail.with({ to: 'a@example.com', subject: 's' }), syncProfile.with({ userId: 1, name: 'p' })];
      const skip = syncProfile.with({ userId: 2, name: 'k' }, { dedupe: { key: 'k' } });
      const window = syncProfile.with(
        { userId: 3, name: 'w' },
        { dedupe: { key: 'w', mode: 'window', windowMs: 60_000 } },
      );
      for (const requests of [
        plain,
        [...plain, skip, window],
        [replaceRow('a', 'r')],
        [...plain, skip, replaceRow('b', 'r')],
      ]) {
        const { result, statements } = await countStatements(testDriver(), () => q.enqueueMany(t.db, requests));
        expect(result).toHaveLength(requests.length);
        expect(statements).toBe(1);
      }
      const { rows } = await t.admin.query(
        `select payload->>'name' as name from "${t.schema}".jobs where dedupe_key = 'r'`,
      );
      expect(rows).toEqual([{ name: 'b' }]);
    });
  });

  describe('bad input: a clear error and nothing written', () => {
    it('unknown kind', async () => {
      const registry = new JobRegistry([sendEmail, syncProfile]);
      await expect(q.enqueueByKind(t.db, registry, 'send-sms', {})).rejects.toThrow(
        /unknown job kind "send-sms"; known kinds: send-email, sync-profile/,
      );
      await expect(q.enqueueByKind(t.db, registry, 'send-sms', {})).rejects.toBeInstanceOf(UnknownKindError);
    });

    it('payload that fails its schema lists every problem', async () => {
      const error = await q
        .enqueue(t.db, sendEmail, { to: 'not-an-email', subject: '' } as never)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PayloadValidationError);
      expect((error as Error).message).toMatch(/invalid payload for send-email: to: .*; subject: /);
    });

    it('payload PostgreSQL cannot store: a NUL character or an unpaired surrogate', async () => {
      for (const subject of ['nul \u0000 here', `half ${'😀'.slice(0, 1)} emoji`]) {
        const error = await q.enqueue(t.db, sendEmail, { to: 'a@example.com', subject }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(PayloadValidationError);
        expect((error as Error).message).toMatch(/NUL character|unpaired UTF-16 surrogate/);
      }
      // A whole emoji is fine.
      expect((await q.enqueue(t.db, sendEmail, { to: 'a@example.com', subject: 'ok 😀' })).outcome).toBe('inserted');
      await t.admin.query(`truncate "${t.schema}".jobs`);
    });

    it('payload over the size limit', async () => {
      const error = await q
        .enqueue(t.db, sendEmail, { to: 'a@example.com', subject: 'x', body: 'y'.repeat(5000) })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(PayloadTooLargeError);
      expect((error as Error).message).toMatch(/over the 4096-byte limit/);
    });

    it('one bad request in a bulk call writes none of them', async () => {
      await expect(
        q.enqueueMany(t.db, [
          sendEmail.with({ to: 'a@example.com', subject: 'ok' }),
          sendEmail.with({ to: 'nope', subject: 'bad' }),
        ]),
      ).rejects.toBeInstanceOf(PayloadValidationError);
    });

    it('hostile queue names are rejected, never reach SQL', async () => {
      for (const queue of [
        'a"b',
        "a'b",
        'a%b',
        'a$b',
        'a;drop table x',
        'a\\b',
        'tab\there',
        'ünï',
        'x'.repeat(65),
        '',
      ]) {
        await expect(
          q.enqueue(t.db, sendEmail, { to: 'a@example.com', subject: 's' }, { queue }),
        ).rejects.toBeInstanceOf(InvalidOptionsError);
      }
    });

    it('out-of-range options', async () => {
      const payload = { to: 'a@example.com', subject: 's' };
      for (const options of [
        { maxAttempts: 0 },
        { maxAttempts: -1 },
        { priority: 5000 },
        { delayMs: -5 },
        { runAt: new Date(), delayMs: 5 },
        { runAt: new Date('nope') },
        { dedupe: { key: 'x'.repeat(256) } },
        { dedupe: { key: 'k', mode: 'window' } },
        { unknownOption: true },
        { runAt: new Date(Date.now() - 2 * 86_400_000) },
        { runAt: new Date(Date.now() + 400 * 86_400_000) },
        { deadline: new Date(Date.now() - 1000) },
        { delayMs: 120_000, deadline: new Date(Date.now() + 60_000) },
      ]) {
        await expect(q.enqueue(t.db, sendEmail, payload, options as never)).rejects.toBeInstanceOf(InvalidOptionsError);
      }
    });

    afterAll(async () => {
      expect(await count()).toBe(0);
    });
  });
});
