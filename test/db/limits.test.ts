import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../base/errors.js';
import { clearLimit, limits, setLimit } from '../../core/controls.js';
import { clearRateLimit, setRateLimit } from '../../core/rate-limits.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { readBacklog } from '../../db/statements/invocations.js';
import type { DeclaredLimit } from '../../db/statements/limits.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('limits', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const claim = (overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 100, invocationId: 'inv', ...overrides });
const email = (i: number) => ({ to: `u${i}@example.com`, subject: 's' });
const opts = () => ({ schema: t.schema, by: 'ops@example.com' });
const done = (jobs: { id: string; leaseToken: string }[]) =>
  jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
const running = async (where = 'true') =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state = 'running' and ${where}`))
    .rows[0].n as number;
const keysOf = (jobs: { id: string }[]) =>
  t.admin
    .query(`select concurrency_key as k from "${t.schema}".jobs where id = any($1::bigint[]) order by id`, [
      jobs.map((j) => j.id),
    ])
    .then((r) => r.rows.map((x) => x.k as string));

describe(`concurrency limits (${testDriver()})`, () => {
  it('a queue limit declared in code: never more running than it; an end written by the claim frees its place in that claim', async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { queue: 'webhooks' })),
      ...Array.from({ length: 4 }, (_, i) => sendEmail.with(email(i), { queue: 'emails' })),
    ]);
    const limits: DeclaredLimit[] = [{ scope: 'queue', name: 'webhooks', maxRunning: 3 }];
    const first = await claim({ limits });
    // The limit holds the webhooks back; the other queue's jobs still fill the batch.
    expect(first.jobs.filter((j) => j.queue === 'webhooks')).toHaveLength(3);
    expect(first.jobs.filter((j) => j.queue === 'emails')).toHaveLength(4);
    expect(first.limited).toBe(true);
    expect((await claim({ limits })).jobs).toEqual([]);
    // Two webhooks end in the next claim's statement: it starts two more, not more.
    const two = first.jobs.filter((j) => j.queue === 'webhooks').slice(0, 2);
    const next = await claim({ limits, settle: done(two) });
    expect(next.jobs.map((j) => j.queue)).toEqual(['webhooks', 'webhooks']);
    expect(await running(`queue = 'webhooks'`)).toBe(3);
  });

  it('a kind limit set at run time holds from the next claim, also when lowered below what runs', async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i))),
      syncProfile.with({ userId: 1, name: 'Ada' }),
    ]);
    const set = await setLimit(t.db, { kind: 'send-email' }, 5, { ...opts(), reason: 'smtp quota' });
    expect(set).toMatchObject({ previous: null, limit: { scope: 'kind', name: 'send-email', maxRunning: 5 } });
    // A plain claim (no limited hint) finds the limit and the limited claim follows in the same call.
    const first = await claim();
    expect(first.jobs.filter((j) => j.kind === 'send-email')).toHaveLength(5);
    expect(first.jobs.filter((j) => j.kind === 'sync-profile')).toHaveLength(1);
    expect(first.limited).toBe(true);
    expect((await setLimit(t.db, { kind: 'send-email' }, 2, opts())).previous).toBe(5);
    const emails = first.jobs.filter((j) => j.kind === 'send-email');
    // 5 run, the limit is now 2: two ends leave 3 running — still no room.
    expect((await claim({ limited: true, settle: done(emails.slice(0, 2)) })).jobs).toEqual([]);
    // Two more ends leave 1: one place.
    const after = await claim({ limited: true, settle: done(emails.slice(2, 4)) });
    expect(after.jobs.map((j) => j.kind)).toEqual(['send-email']);
    expect(await running(`kind = 'send-email'`)).toBe(2);
    const listed = await limits(t.db, { schema: t.schema });
    expect(listed).toEqual([expect.objectContaining({ scope: 'kind', name: 'send-email', maxRunning: 2, running: 2 })]);
  });

  it('a run-time limit overrides the declared one until cleared', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 8 }, (_, i) => sendEmail.with(email(i), { queue: 'webhooks' })),
    );
    const limits: DeclaredLimit[] = [{ scope: 'queue', name: 'webhooks', maxRunning: 1 }];
    await setLimit(t.db, { queue: 'webhooks' }, 4, opts());
    expect((await claim({ limits })).jobs).toHaveLength(4);
    expect(await clearLimit(t.db, { queue: 'webhooks' }, { schema: t.schema })).toMatchObject({ maxRunning: 4 });
    expect(await clearLimit(t.db, { queue: 'webhooks' }, { schema: t.schema })).toBeNull();
    // Back to the declared 1, with 4 running: nothing starts.
    expect((await claim({ limits })).jobs).toEqual([]);
  });

  it("a per-key limit caps each key's running jobs; other keys are not held back", async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: 'acme' })),
      ...Array.from({ length: 3 }, (_, i) => sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: 'globex' })),
      sendEmail.with(email(99), { queue: 'tenants' }),
    ]);
    await setLimit(t.db, { queue: 'tenants', perKey: true }, 2, opts());
    const first = await claim();
    expect((await keysOf(first.jobs)).sort()).toEqual(['acme', 'acme', 'globex', 'globex', null].sort());
    expect((await claim({ limited: true })).jobs).toEqual([]);
    const listed = await limits(t.db, { schema: t.schema });
    expect(listed[0]).toMatchObject({ scope: 'key', name: 'tenants', running: 2 });
    // The per-key limit counts per queue: acme's jobs in another queue are not limited by it.
    await q.enqueueMany(t.db, [sendEmail.with(email(1), { queue: 'other', concurrencyKey: 'acme' })]);
    expect((await claim({ limited: true })).jobs.map((j) => j.queue)).toEqual(['other']);
  });

  it('a key with less room than an equal share leaves the rest to the other keys: the batch is full', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 50 }, (_, i) =>
        sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: ['a', 'b', 'c', 'd', 'e'][i % 5] as string }),
      ),
    );
    const limits: DeclaredLimit[] = [{ scope: 'key', name: 'tenants', maxRunning: 3 }];
    // Key a runs 2 of its 3: an equal share of 10 over 5 keys (2 each) would leave the batch at 9.
    const a = await t.admin.query(
      `select id::text as id from "${t.schema}".jobs where concurrency_key = 'a' order by id limit 2`,
    );
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'running', attempt = 1, lease_token = gen_random_uuid(),
         lease_expires_at = now() + interval '1 minute', started_at = now(), attempted_at = now()
       where id = any($1::bigint[])`,
      [a.rows.map((r) => r.id)],
    );
    for (const keyStart of [-(2 ** 31), 0, 2 ** 30]) {
      const { jobs } = await claim({ limits, limit: 10, keyStart });
      expect(jobs).toHaveLength(10);
      const keys = await keysOf(jobs);
      expect(keys.filter((k) => k === 'a').length).toBeLessThanOrEqual(1);
      for (const k of new Set(keys)) expect(keys.filter((x) => x === k).length).toBeLessThanOrEqual(3);
      await claim({ limits, limit: 0, settle: done(jobs) });
    }
  });

  it('a claim passes over the keys another claim holds and fills its batch from the others', async () => {
    const keys = Array.from({ length: 8 }, (_, i) => `k${i}`);
    await q.enqueueMany(
      t.db,
      Array.from({ length: 80 }, (_, i) =>
        sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: keys[i % 8] as string }),
      ),
    );
    const limits: DeclaredLimit[] = [{ scope: 'key', name: 'tenants', maxRunning: 2 }];
    // Another claim holds k0 to k3 (claim_room's locks, held to its commit).
    const other = await t.admin.connect();
    try {
      await other.query('begin');
      await other.query(
        `select pg_advisory_xact_lock(hashtextextended($1 || chr(31) || 'key' || chr(31) || 'tenants' || chr(31) || k, 0))
         from unnest($2::text[]) k`,
        [`"${t.schema}"`, keys.slice(0, 4)],
      );
      const { jobs } = await claim({ limits, limit: 8, keyStart: -(2 ** 31) });
      expect(jobs).toHaveLength(8);
      expect([...new Set(await keysOf(jobs))].sort()).toEqual(keys.slice(4));
      await other.query('commit');
    } finally {
      other.release();
    }
    // Once it committed, its keys are walked again.
    const next = await claim({ limits, limit: 8, keyStart: -(2 ** 31) });
    expect([...new Set(await keysOf(next.jobs))].sort()).toEqual(keys.slice(0, 4));
  });

  it('an expired lease still holds its place, and its rescue needs no room', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 3 }, (_, i) => sendEmail.with(email(i), { queue: 'webhooks' })),
    );
    const limits: DeclaredLimit[] = [{ scope: 'queue', name: 'webhooks', maxRunning: 1 }];
    const first = await claim({ limits, leases: [{ kind: 'send-email', leaseMs: 1_000 }] });
    expect(first.jobs).toHaveLength(1);
    const later = new Date(Date.now() + 60_000);
    // The lease ran out: the job may still be running somewhere, so nothing new starts; it is rescued.
    const rescue = await claim({ limits, now: later });
    expect(rescue.jobs.map((j) => [j.id, j.attempt])).toEqual([[first.jobs[0]?.id, 2]]);
    expect(await running(`queue = 'webhooks'`)).toBe(1);
  });

  it('the plain claim stays plain until a limit or a rate reaches its own queues or kinds (claim_guard)', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 8 }, (_, i) => sendEmail.with(email(i), { queue: 'emails' })),
    );
    const emailsOnly = { leases: LEASES.slice(0, 1), queues: ['emails'], limit: 1 };
    const shapeOf = (r: { jobs: unknown[]; limited: boolean; rated: boolean }) => [r.jobs.length, r.limited, r.rated];
    // Rules on another queue and another kind do not reach this claimer.
    await setLimit(t.db, { queue: 'webhooks' }, 4, opts());
    await setLimit(t.db, { kind: 'sync-profile' }, 4, opts());
    await setRateLimit(t.db, { queue: 'webhooks' }, { limit: 5, periodMs: 1_000 }, opts());
    expect(shapeOf(await claim(emailsOnly))).toEqual([1, false, false]);
    // A claimer of every queue is reached by the queue's limit and rate.
    expect(shapeOf(await claim({ leases: LEASES.slice(0, 1), limit: 1 }))).toEqual([1, true, true]);
    // A destination's rate may reach any claimer's jobs: the rated claim.
    await setRateLimit(t.db, { destination: 'api.example.com' }, { limit: 5, periodMs: 1_000 }, opts());
    expect(shapeOf(await claim(emailsOnly))).toEqual([1, true, true]);
    await clearRateLimit(t.db, { destination: 'api.example.com' }, opts());
    expect(shapeOf(await claim(emailsOnly))).toEqual([1, false, false]);
    // A limit on this claimer's kind, then a rate on its queue.
    await setLimit(t.db, { kind: 'send-email' }, 100, opts());
    expect(shapeOf(await claim(emailsOnly))).toEqual([1, true, false]);
    await setRateLimit(t.db, { queue: 'emails' }, { limit: 5, periodMs: 1_000 }, opts());
    expect(shapeOf(await claim(emailsOnly))).toEqual([1, true, true]);
  });

  it('refuses bad limits and targets with a clear error, and changes nothing', async () => {
    await expect(setLimit(t.db, { queue: 'webhooks' }, 0, opts())).rejects.toThrow(InvalidOptionsError);
    await expect(setLimit(t.db, { queue: 'webhooks' }, 2.5, opts())).rejects.toThrow(/integer from 1 to 100000/);
    await expect(setLimit(t.db, { kind: 'send-email', perKey: true } as never, 2, opts())).rejects.toThrow(
      /perKey limits are set on a queue/,
    );
    await expect(setLimit(t.db, { queue: 'bad name!' }, 2, opts())).rejects.toThrow(InvalidOptionsError);
    await expect(setLimit(t.db, { queue: 'webhooks' }, 2, { schema: t.schema, by: ' ' })).rejects.toThrow(/by must/);
    await expect(q.enqueue(t.db, sendEmail, email(1), { concurrencyKey: '' })).rejects.toThrow(InvalidOptionsError);
    expect(await limits(t.db, { schema: t.schema })).toEqual([]);
  });
});

describe(`fair share between concurrency keys (${testDriver()})`, () => {
  it("one key's backlog of 3,000 does not starve 20 keys of 5: every small key's jobs start within the first claims", async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 3_000 }, (_, i) => sendEmail.with(email(i), { concurrencyKey: 'big' })),
    );
    await q.enqueueMany(
      t.db,
      Array.from({ length: 100 }, (_, i) => sendEmail.with(email(i), { concurrencyKey: `small-${i % 20}` })),
    );
    // Batches of 50, as an invocation would claim them (each claim's walk starts at another hash).
    let claims = 0;
    let bigTaken = 0;
    while (claims < 40 && (await running(`concurrency_key <> 'big'`)) < 100) {
      claims++;
      const { jobs } = await claim({ limit: 50, keyStart: ((claims * 2 ** 28) % 2 ** 32) - 2 ** 31 });
      bigTaken += (await keysOf(jobs)).filter((k) => k === 'big').length;
    }
    const smallLeft = await running(`concurrency_key <> 'big'`);
    // All 100 small jobs started within a handful of claims, while the big key took its share.
    expect(smallLeft).toBe(100);
    expect(claims).toBeLessThanOrEqual(6);
    expect(bigTaken).toBeGreaterThan(0);
    expect(bigTaken).toBeLessThan(claims * 50);
  });

  it('a key alone still fills whole batches (its share is the whole batch)', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 120 }, (_, i) => sendEmail.with(email(i), { concurrencyKey: 'only' })),
    );
    expect((await claim({ limit: 50 })).jobs).toHaveLength(50);
  });

  it('the fan-out backlog counts keyed jobs', async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 3 }, (_, i) => sendEmail.with(email(i), { concurrencyKey: 'k' })),
      ...Array.from({ length: 2 }, (_, i) => sendEmail.with(email(i))),
    ]);
    const backlog = await readBacklog(t.db.executor, t.schema, { worker: 'w', kinds: ['send-email'], cap: 100 });
    expect(backlog.ready).toBe(5);
  });
});
