import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from '../../base/errors.js';
import { clearRateLimit, rateLimits, setRateLimit } from '../../core/rate-limits.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import type { DeclaredRateLimit } from '../../db/statements/rate-limits.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('rate_limits', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const { at } = useSuppliedClock();
const claim = (now: Date, overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 100, invocationId: 'inv', now, ...overrides });
const email = (i: number) => ({ to: `u${i}@example.com`, subject: 's' });
const opts = () => ({ schema: t.schema, by: 'ops@example.com' });
const count = <J>(jobs: readonly J[], f: (j: J) => boolean) => jobs.filter(f).length;

describe(`rate limits (${testDriver()})`, () => {
  it('a queue rate declared in code: at most its starts per period, the next ones when a token comes back; other queues are not held', async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 30 }, (_, i) => sendEmail.with(email(i), { queue: 'webhooks' })),
      ...Array.from({ length: 20 }, (_, i) => sendEmail.with(email(i), { queue: 'emails' })),
    ]);
    const rateLimits: DeclaredRateLimit[] = [{ scope: 'queue', name: 'webhooks', maxStarts: 10, periodMs: 1_000 }];
    // The first 25 in claim order are webhooks: ten of them start.
    const first = await claim(at(0), { rateLimits, limit: 25 });
    expect(count(first.jobs, (j) => j.queue === 'webhooks')).toBe(10);
    expect(first.rated).toBe(true);
    // Half a period later the queue's rate is used up: its backlog is left out and the emails start;
    // the claim says when the queue's next token comes back.
    const second = await claim(at(500), { rateLimits, limit: 25 });
    expect(count(second.jobs, (j) => j.queue === 'webhooks')).toBe(0);
    expect(count(second.jobs, (j) => j.queue === 'emails')).toBe(20);
    expect(second.nextStartAt?.getTime()).toBe(at(1_000).getTime());
    const early = await claim(at(999), { rateLimits });
    expect(early.jobs).toEqual([]);
    expect(early.nextStartAt?.getTime()).toBe(at(1_000).getTime());
    // One period after the first starts, ten more.
    const third = await claim(at(1_000), { rateLimits });
    expect(third.jobs).toHaveLength(10);
    expect(third.nextStartAt?.getTime()).toBe(at(2_000).getTime());
  });

  it('a destination rate set at run time, and `*`: each destination its own bucket; jobs without one are not held', async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { destination: 'slow.example' })),
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { destination: 'a.example' })),
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { destination: 'b.example' })),
      ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i))),
    ]);
    const { rateLimit, previous } = await setRateLimit(t.db, { destination: 'slow.example' }, { limit: 2 }, opts());
    expect(rateLimit).toMatchObject({ scope: 'destination', name: 'slow.example', maxStarts: 2, periodMs: 1_000 });
    expect(previous).toBeNull();
    await setRateLimit(t.db, { destination: '*' }, { limit: 3, periodMs: 60_000 }, opts());
    // The first claim is plain or limited: it finds the rates and the rated claim follows in the same call.
    const first = await claim(at(0));
    const by = (d?: string) => count(first.jobs, (j) => (j.destination ?? undefined) === d);
    expect([by('slow.example'), by('a.example'), by('b.example'), by(undefined)]).toEqual([2, 3, 3, 10]);
    expect(first.rated).toBe(true);
    const use = await rateLimits(t.db, { schema: t.schema });
    expect(use.rateLimits.map((r) => r.name)).toEqual(['*', 'slow.example']);
    expect(use.use.map((u) => [u.scope, u.name, u.used])).toEqual([
      ['destination', 'a.example', 3],
      ['destination', 'b.example', 3],
      ['destination', 'slow.example', 2],
    ]);
    // After a second, slow.example has two more; the others wait for their minute.
    const second = await claim(at(1_000), { rated: true });
    expect(second.jobs.map((j) => j.destination)).toEqual(['slow.example', 'slow.example']);
    // Cleared: `*` applies to slow.example from the next claim (3 a minute: its 4 starts use it up).
    expect((await clearRateLimit(t.db, { destination: 'slow.example' }, { schema: t.schema }))?.maxStarts).toBe(2);
    expect((await claim(at(1_100), { rated: true })).jobs).toEqual([]);
    // And with `*` cleared too, nothing holds them: the claim is not even rated any more.
    await clearRateLimit(t.db, { destination: '*' }, { schema: t.schema });
    const last = await claim(at(1_200), { rated: true });
    expect(last.jobs).toHaveLength(6 + 7 + 7);
    expect(last.rated).toBe(false);
  });

  it('a per-key rate: each concurrency key of the queue has its own; a kind rate holds the kind only', async () => {
    await q.enqueueMany(t.db, [
      ...['a', 'b', 'c'].flatMap((k) =>
        Array.from({ length: 5 }, (_, i) => sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: k })),
      ),
      ...Array.from({ length: 6 }, (_, i) => syncProfile.with({ userId: i, name: 'n' })),
    ]);
    await setRateLimit(t.db, { queue: 'tenants', perKey: true }, { limit: 2, periodMs: 10_000 }, opts());
    await setRateLimit(t.db, { kind: 'sync-profile' }, { limit: 4, periodMs: 10_000 }, opts());
    const first = await claim(at(0));
    const keys = await t.admin.query(
      `select concurrency_key as k, count(*)::int as n from "${t.schema}".jobs where state = 'running'
        and concurrency_key is not null group by 1 order by 1`,
    );
    expect(keys.rows).toEqual([
      { k: 'a', n: 2 },
      { k: 'b', n: 2 },
      { k: 'c', n: 2 },
    ]);
    expect(count(first.jobs, (j) => j.queue === 'default')).toBe(4);
    const second = await claim(at(5_000), { rated: true });
    expect(second.jobs).toEqual([]);
    expect(second.nextStartAt?.getTime()).toBe(at(10_000).getTime());
    expect((await claim(at(10_000), { rated: true })).jobs).toHaveLength(6 + 2);
  });

  it('a rescue is a start: an expired lease is not rescued while the rate is used up', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 3 }, (_, i) => sendEmail.with(email(i), { destination: 'partner.example' })),
    );
    const rateLimits: DeclaredRateLimit[] = [
      { scope: 'destination', name: 'partner.example', maxStarts: 3, periodMs: 10_000 },
    ];
    const leases = [{ kind: 'send-email', leaseMs: 1_000 }];
    expect((await claim(at(0), { rateLimits, leases })).jobs).toHaveLength(3);
    // Their leases ran out at 1 s; the rate's period has 9 s to go.
    const early = await claim(at(2_000), { rateLimits, leases });
    expect(early.jobs).toEqual([]);
    expect(early.nextStartAt?.getTime()).toBe(at(10_000).getTime());
    const rescued = await claim(at(10_000), { rateLimits, leases });
    expect(rescued.jobs.map((j) => j.attempt)).toEqual([2, 2, 2]);
  });

  it('a run-time rate overrides the declared one of the same scope', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 20 }, (_, i) => sendEmail.with(email(i))),
    );
    const rateLimits: DeclaredRateLimit[] = [{ scope: 'kind', name: 'send-email', maxStarts: 10, periodMs: 1_000 }];
    await setRateLimit(t.db, { kind: 'send-email' }, { limit: 4, periodMs: 1_000 }, opts());
    expect((await claim(at(0), { rateLimits })).jobs).toHaveLength(4);
  });

  it('refuses bad rates and targets with a clear error, and stores nothing', async () => {
    const bad: [Parameters<typeof setRateLimit>[1], Parameters<typeof setRateLimit>[2], RegExp][] = [
      [{ queue: 'q' }, { limit: 0 }, /limit must be a whole number from 1 to 100000/],
      [{ queue: 'q' }, { limit: 1.5 }, /limit must be a whole number/],
      [{ queue: 'q' }, { limit: 5, periodMs: 999 }, /periodMs must be a whole number of milliseconds from 1000/],
      [{ queue: 'q' }, { limit: 5, periodMs: 86_400_001 }, /periodMs/],
      [{ kind: 'k', perKey: true } as never, { limit: 5 }, /perKey rates are set on a queue/],
      [{ queue: 'q', destination: 'd' } as never, { limit: 5 }, /exactly one of queue, kind or destination/],
      [{ destination: 'x'.repeat(201) }, { limit: 5 }, /destination must be 1-200 characters/],
      [{ queue: 'bad name!' }, { limit: 5 }, /queue/],
    ];
    for (const [target, rate, message] of bad) {
      await expect(setRateLimit(t.db, target, rate, opts())).rejects.toThrow(InvalidOptionsError);
      await expect(setRateLimit(t.db, target, rate, opts())).rejects.toThrow(message);
    }
    await expect(setRateLimit(t.db, { queue: 'q' }, { limit: 5 }, { ...opts(), by: ' ' })).rejects.toThrow(/by must/);
    expect((await rateLimits(t.db, { schema: t.schema })).rateLimits).toEqual([]);
  });
});
