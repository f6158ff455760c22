import { describe, expect, it } from 'vitest';
import { InvalidOptionsError, PayloadValidationError } from '../../base/errors.js';
import { activity, cancel, expireDeadlines, getJob, moveToDlq, stats } from '../../core/admin.js';
import { JobRegistry } from '../../core/jobs.js';
import { replay } from '../../core/replay.js';
import { claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
const registry = new JobRegistry([sendEmail, syncProfile]);

useTestSchema('admin', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const opts = () => ({ schema: t.schema });
const email = (i = 0) => ({ to: `u${i}@example.com`, subject: `s${i}` });

/** Enqueues jobs and kills them with the given reason, through the real claim and settle statements. */
async function deadJobs(n: number, reason = 'http_4xx', kind: 'send-email' | 'sync-profile' = 'send-email') {
  const requests = Array.from({ length: n }, (_, i) =>
    kind === 'send-email' ? sendEmail.with(email(i)) : syncProfile.with({ userId: i, name: `n${i}` }),
  );
  const ids = (await q.enqueueMany(t.db, requests)).map((r) => r.id);
  const { jobs } = await claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: n, invocationId: 'x' });
  await settleJobs(
    t.db.executor,
    t.schema,
    jobs.map((j) => ({
      id: j.id,
      leaseToken: j.leaseToken,
      outcome: 'dead' as const,
      reason,
      error: { class: 'E', message: 'm' },
    })),
  );
  return ids;
}

describe(`replay (${testDriver()})`, () => {
  it('by id: the dead job is queued again with provenance, attempts reset, error history kept', async () => {
    const [id] = await deadJobs(1);
    const result = await replay(t.db, { ids: [id!], by: 'alice', ...opts() });
    expect(result.replayed).toEqual([{ id, kind: 'send-email', queue: 'emails', deadReason: 'http_4xx' }]);
    expect(result.refused).toEqual([]);
    const job = await getJob(t.db, id!, opts());
    expect(job).toMatchObject({
      state: 'queued',
      attempt: 0,
      deadReason: null,
      finishedAt: null,
      replayCount: 1,
      replayedBy: 'alice',
    });
    expect(job?.replayedAt).toBeInstanceOf(Date);
    expect(job?.errors).toHaveLength(1);
  });

  it('the same replay twice leaves one live job and refuses the second time with a clear message', async () => {
    const [id] = await deadJobs(1);
    await replay(t.db, { ids: [id!], ...opts() });
    const second = await replay(t.db, { ids: [id!], ...opts() });
    expect(second.replayed).toEqual([]);
    expect(second.refused).toEqual([
      { id, state: 'queued', message: `job ${id} is queued, not dead: only dead jobs can be replayed` },
    ]);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`);
    expect(rows[0].n).toBe(1);
    expect((await getJob(t.db, id!, opts()))?.replayCount).toBe(1);
  });

  it('concurrent identical replays replay each job once', async () => {
    const ids = await deadJobs(20);
    const results = await Promise.all(Array.from({ length: 4 }, () => replay(t.db, { ids, ...opts() })));
    expect(results.flatMap((r) => r.replayed.map((j) => j.id)).sort()).toEqual([...ids].sort());
    const { rows } = await t.admin.query(`select max(replay_count)::int as m from "${t.schema}".jobs`);
    expect(rows[0].m).toBe(1);
  });

  it('by filter, with a limit and a dry run', async () => {
    await deadJobs(3, 'http_4xx');
    await deadJobs(2, 'max_attempts', 'sync-profile');
    const dry = await replay(t.db, { reason: 'http_4xx', dryRun: true, ...opts() });
    expect(dry.replayed).toHaveLength(3);
    expect(dry.dryRun).toBe(true);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state = 'dead'`);
    expect(rows[0].n).toBe(5);
    const limited = await replay(t.db, { kind: 'sync-profile', limit: 1, ...opts() });
    expect(limited.replayed).toHaveLength(1);
    const rest = await replay(t.db, { queue: 'emails', since: new Date(Date.now() - 60_000), ...opts() });
    expect(rest.replayed).toHaveLength(3);
    expect(rest.replayed.every((j) => j.kind === 'send-email')).toBe(true);
  });

  it('refuses ids that are not dead or do not exist, and an empty filter unless all', async () => {
    const live = await q.enqueue(t.db, sendEmail, email());
    const result = await replay(t.db, { ids: [live.id, '999999'], ...opts() });
    expect(result.refused).toEqual(
      expect.arrayContaining([
        { id: live.id, state: 'queued', message: `job ${live.id} is queued, not dead: only dead jobs can be replayed` },
        { id: '999999', state: null, message: 'job 999999 does not exist' },
      ]),
    );
    await expect(replay(t.db, { ...opts() })).rejects.toThrow(/refusing to replay with no ids and no filter/);
    await deadJobs(2);
    expect((await replay(t.db, { all: true, ...opts() })).replayed).toHaveLength(2);
  });

  it('overrides the payload (validated against the kind) and options', async () => {
    const [id] = await deadJobs(1, 'validation_error');
    await expect(
      replay(t.db, { ids: [id!], kind: 'send-email', override: { payload: { to: 'bad' } }, registry, ...opts() }),
    ).rejects.toBeInstanceOf(PayloadValidationError);
    await expect(replay(t.db, { ids: [id!], override: { payload: email(9) }, ...opts() })).rejects.toBeInstanceOf(
      InvalidOptionsError,
    );
    await replay(t.db, {
      ids: [id!],
      kind: 'send-email',
      override: { payload: email(9), priority: -3, maxAttempts: 7 },
      registry,
      ...opts(),
    });
    expect(await getJob(t.db, id!, opts())).toMatchObject({
      payload: { ...email(9), body: '' },
      priority: -3,
      maxAttempts: 7,
      state: 'queued',
    });
  });

  it('rejects malformed ids and hostile names', async () => {
    await expect(replay(t.db, { ids: ['1; drop table x'], ...opts() })).rejects.toBeInstanceOf(InvalidOptionsError);
    await expect(replay(t.db, { queue: 'a"b', ...opts() })).rejects.toBeInstanceOf(InvalidOptionsError);
  });
});

describe(`cancel, deadlines, stats (${testDriver()})`, () => {
  it('cancels queued and running jobs; finished and unknown ones are reported, unchanged', async () => {
    const [deadId] = await deadJobs(1);
    const queued = await q.enqueue(t.db, sendEmail, email(1));
    const result = await cancel(t.db, [queued.id, deadId!, '424242'], opts());
    expect(result).toEqual([
      { id: queued.id, previousState: 'queued', cancelled: true },
      { id: deadId, previousState: 'dead', cancelled: false },
      { id: '424242', previousState: null, cancelled: false },
    ]);
    expect(await getJob(t.db, queued.id, opts())).toMatchObject({ state: 'cancelled' });
    expect(await getJob(t.db, deadId!, opts())).toMatchObject({ state: 'dead' });
  });

  it("a cancelled running job's holder loses its completion", async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email());
    const [job] = (await claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 1, invocationId: 'x' })).jobs;
    await cancel(t.db, [id], opts());
    expect(
      await settleJobs(t.db.executor, t.schema, [{ id, leaseToken: job!.leaseToken, outcome: 'completed' }]),
    ).toEqual([]);
    expect((await getJob(t.db, id, opts()))?.state).toBe('cancelled');
  });

  it('moveToDlq: queued and running jobs die as manual, with who did it; the holder loses its completion; replay brings them back', async () => {
    const [deadId] = await deadJobs(1);
    const queued = await q.enqueue(t.db, sendEmail, email(1));
    const running = await q.enqueue(t.db, sendEmail, email(2));
    const [job] = (await claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 1, invocationId: 'x' })).jobs;
    const held = job?.id === running.id ? running : queued;
    const result = await moveToDlq(t.db, [queued.id, running.id, deadId!, '424242'], { ...opts(), by: 'ops:ada' });
    expect(result.map((r) => [r.id, r.moved])).toEqual([
      [queued.id, true],
      [running.id, true],
      [deadId, false],
      ['424242', false],
    ]);
    expect(result.find((r) => r.id === held.id)?.previousState).toBe('running');
    const moved = await getJob(t.db, held.id, opts());
    expect(moved).toMatchObject({ state: 'dead', deadReason: 'manual', leaseExpiresAt: null });
    expect(moved?.lastError).toMatchObject({ class: 'moved_to_dlq', message: 'moved to the DLQ by ops:ada' });
    expect(
      await settleJobs(t.db.executor, t.schema, [{ id: held.id, leaseToken: job!.leaseToken, outcome: 'completed' }]),
    ).toEqual([]);
    expect((await getJob(t.db, held.id, opts()))?.state).toBe('dead');
    const replayed = await replay(t.db, { ...opts(), reason: 'manual', by: 'ops:ada' });
    expect(replayed.replayed.map((r) => r.id).sort()).toEqual([queued.id, running.id].sort());
    await expect(moveToDlq(t.db, [queued.id], { ...opts(), reason: 'Bad Reason' })).rejects.toThrow(
      InvalidOptionsError,
    );
    await expect(moveToDlq(t.db, ['1; drop'], opts())).rejects.toThrow(InvalidOptionsError);
  });

  it('expireDeadlines moves only queued jobs past their deadline to the DLQ', async () => {
    const past = await q.enqueue(t.db, sendEmail, email(1), { deadline: new Date(Date.now() + 60_000) });
    // Time passes beyond the deadline (moved on the database side; nobody sleeps).
    await t.admin.query(`update "${t.schema}".jobs set deadline = now() - interval '1 second' where id = $1`, [
      past.id,
    ]);
    const future = await q.enqueue(t.db, sendEmail, email(2), { deadline: new Date(Date.now() + 3_600_000) });
    expect(await expireDeadlines(t.db, opts())).toEqual([past.id]);
    expect(await getJob(t.db, past.id, opts())).toMatchObject({ state: 'dead', deadReason: 'deadline_exceeded' });
    expect((await getJob(t.db, future.id, opts()))?.state).toBe('queued');
  });

  it('stats tell ready, scheduled, retry-waiting, running, expired leases and dead apart', async () => {
    await deadJobs(1, 'http_4xx', 'sync-profile');
    // Retry-waiting: one failed and waits for its backoff.
    const retry = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'r' });
    const [claimed] = (await claimJobs(t.db.executor, t.schema, { leases: [LEASES[1]!], limit: 1, invocationId: 'x' }))
      .jobs;
    await settleJobs(t.db.executor, t.schema, [
      {
        id: retry.id,
        leaseToken: claimed!.leaseToken,
        outcome: 'retry',
        delayMs: 600_000,
        error: { class: 'E', message: 'm' },
      },
    ]);
    await q.enqueueMany(t.db, [sendEmail.with(email(1)), sendEmail.with(email(2)), sendEmail.with(email(3))]);
    await q.enqueue(t.db, sendEmail, email(4), { delayMs: 3_600_000 });
    // Running: 2 claimed, one of them with an expired lease.
    const { jobs } = await claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 2, invocationId: 'x' });
    await t.admin.query(`update "${t.schema}".jobs set lease_expires_at = now() - interval '1 second' where id = $1`, [
      jobs[0]!.id,
    ]);
    const rows = await stats(t.db, opts());
    expect(rows).toEqual([
      expect.objectContaining({
        queue: 'default',
        kind: 'sync-profile',
        retryWaiting: 1,
        dead: 1,
        ready: 0,
        running: 0,
      }),
      expect.objectContaining({
        queue: 'emails',
        kind: 'send-email',
        ready: 1,
        scheduled: 1,
        running: 2,
        leaseExpired: 1,
        dead: 0,
      }),
    ]);
    expect(rows[1]?.oldestReadyAgeSeconds).toBeGreaterThanOrEqual(0);
  });

  it('stats count the last hour of finished jobs and the whole DLQ; activity gives throughput and error rate', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(`
      insert into ${s}.jobs (kind, queue, payload, state, finished_at) select 'k', 'q', '{}', 'completed', now() - interval '2 minutes' from generate_series(1, 30);
      insert into ${s}.jobs (kind, queue, payload, state, finished_at) select 'k', 'q', '{}', 'completed', now() - interval '2 hours' from generate_series(1, 50);
      insert into ${s}.jobs (kind, queue, payload, state, finished_at, dead_reason) select 'k', 'q', '{}', 'dead', now() - interval '1 minute', 'http_4xx' from generate_series(1, 10);
      insert into ${s}.jobs (kind, queue, payload, state, finished_at, dead_reason) select 'k', 'q', '{}', 'dead', now() - interval '3 days', 'max_attempts' from generate_series(1, 5);`);
    const [row] = await stats(t.db, opts());
    expect(row).toMatchObject({ queue: 'q', kind: 'k', dead: 15, completedLastHour: 30, deadLastHour: 10, ready: 0 });
    const [recent] = await activity(t.db, { ...opts(), windowSeconds: 300 });
    expect(recent).toMatchObject({ completed: 30, dead: 10, errorRate: 0.25 });
    expect(recent?.throughputPerSecond).toBeCloseTo(30 / 300, 6);
  });

  it('queue_stats and queue_activity never scan the whole table', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(
      `insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'completed', now() - interval '2 days' from generate_series(1, 20000)`,
    );
    await t.admin.query(`analyze ${s}.jobs`);
    for (const query of [`select * from ${s}.queue_stats`, `select * from ${s}.queue_activity(300)`]) {
      const plan = JSON.stringify((await t.admin.query(`explain (format json) ${query}`)).rows);
      expect(plan).not.toMatch(/Seq Scan[^}]*"Relation Name":"jobs"/);
    }
  });
});
