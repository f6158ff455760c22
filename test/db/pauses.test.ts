import { describe, expect, it } from 'vitest';
import { stats } from '../../core/admin.js';
import { pause, pauses, resume } from '../../core/controls.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { readBacklog } from '../../db/statements/invocations.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('pauses', (ctx) => {
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
const by = { by: 'ops@example.com' };
const opts = () => ({ schema: t.schema, ...by });
const attempts = async () =>
  (await t.admin.query(`select queue, sum(attempt)::int as n from "${t.schema}".jobs group by queue order by queue`))
    .rows;

describe(`pause and resume (${testDriver()})`, () => {
  it("a paused queue's jobs are not claimed and keep their attempts; resume makes them claimable at once", async () => {
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 5 }, (_, i) => sendEmail.with(email(i), { queue: 'webhooks' })),
      ...Array.from({ length: 3 }, (_, i) => sendEmail.with(email(i), { queue: 'emails' })),
    ]);
    const paused = await pause(t.db, { queue: 'webhooks' }, { ...opts(), reason: 'partner down' });
    expect(paused).toMatchObject({ changed: true, pause: { scope: 'queue', name: 'webhooks', pausedBy: by.by } });
    const first = await claim();
    expect(first.jobs.map((j) => j.queue)).toEqual(['emails', 'emails', 'emails']);
    expect(await attempts()).toEqual([
      { queue: 'emails', n: 3 },
      { queue: 'webhooks', n: 0 },
    ]);
    expect(await resume(t.db, { queue: 'webhooks' }, { schema: t.schema })).toMatchObject({ name: 'webhooks' });
    expect((await claim()).jobs.map((j) => j.queue)).toEqual(Array(5).fill('webhooks'));
  });

  it('a paused kind is held back in every queue; other kinds run', async () => {
    await q.enqueueMany(t.db, [
      sendEmail.with(email(1), { queue: 'a' }),
      sendEmail.with(email(2), { queue: 'b' }),
      syncProfile.with({ userId: 1, name: 'Ada' }, { queue: 'a' }),
    ]);
    await pause(t.db, { kind: 'send-email' }, opts());
    expect((await claim()).jobs.map((j) => j.kind)).toEqual(['sync-profile']);
    await resume(t.db, { kind: 'send-email' }, { schema: t.schema });
    expect((await claim()).jobs.map((j) => j.kind)).toEqual(['send-email', 'send-email']);
  });

  it('an expired lease in a paused queue is not rescued until resume (a rescue starts an attempt)', async () => {
    await q.enqueue(t.db, sendEmail, email(1), { queue: 'webhooks' });
    const [job] = (await claim({ invocationId: 'died' })).jobs;
    await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second'`);
    await pause(t.db, { queue: 'webhooks' }, opts());
    expect((await claim()).jobs).toEqual([]);
    await resume(t.db, { queue: 'webhooks' }, { schema: t.schema });
    const rescued = (await claim()).jobs;
    expect(rescued.map((j) => [j.id, j.attempt])).toEqual([[job?.id, 2]]);
  });

  it('the fan-out backlog does not count paused jobs', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 4 }, (_, i) => sendEmail.with(email(i), { queue: i < 3 ? 'webhooks' : 'emails' })),
    );
    const backlog = () => readBacklog(t.db.executor, t.schema, { worker: 'w', kinds: ['send-email'], cap: 100 });
    expect((await backlog()).ready).toBe(4);
    await pause(t.db, { queue: 'webhooks' }, opts());
    expect((await backlog()).ready).toBe(1);
  });

  it('pausing twice keeps the first pause; resuming twice finds nothing the second time; stats show it', async () => {
    await q.enqueue(t.db, sendEmail, email(1), { queue: 'webhooks' });
    const first = await pause(t.db, { queue: 'webhooks' }, { ...opts(), reason: 'first' });
    const second = await pause(t.db, { queue: 'webhooks' }, { schema: t.schema, by: 'someone-else', reason: 'second' });
    expect(second.changed).toBe(false);
    expect(second.pause).toEqual(first.pause);
    expect(await pauses(t.db, { schema: t.schema })).toEqual([first.pause]);
    const [row] = await stats(t.db, { schema: t.schema });
    expect(row).toMatchObject({ queue: 'webhooks', ready: 1, paused: { scope: 'queue', by: by.by } });
    expect(row?.paused?.since).toEqual(first.pause.pausedAt);
    expect(await resume(t.db, { queue: 'webhooks' }, { schema: t.schema })).toEqual(first.pause);
    expect(await resume(t.db, { queue: 'webhooks' }, { schema: t.schema })).toBeNull();
    expect((await stats(t.db, { schema: t.schema }))[0]?.paused).toBeNull();
  });

  it('refuses a bad target or a missing `by` with a clear error, and changes nothing', async () => {
    await expect(pause(t.db, { queue: 'bad name!' }, opts())).rejects.toThrow(/invalid queue name "bad name!"/);
    await expect(pause(t.db, {} as { queue: string }, opts())).rejects.toThrow('name exactly one of queue or kind');
    await expect(pause(t.db, { queue: 'q' }, { schema: t.schema, by: ' ' })).rejects.toThrow(/by must name who pauses/);
    expect(await pauses(t.db, { schema: t.schema })).toEqual([]);
  });
});
