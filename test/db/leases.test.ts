import { describe, expect, it } from 'vitest';
import { buryDoomed } from '../../db/statements/bury.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { extendLease, releaseJobs, reportProgress, settleJobs } from '../../db/statements/settle.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('leases', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const later = (ms: number) => new Date(Date.now() + ms);
const claim = (overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 10, invocationId: 'inv-a', ...overrides });
const row = async (id: string) => (await t.admin.query(`select * from "${t.schema}".jobs where id = $1`, [id])).rows[0];
const email = (i = 0) => ({ to: `u${i}@example.com`, subject: `s${i}` });
const failure = { class: 'Error', message: 'boom' };

describe(`claim (${testDriver()})`, () => {
  it('claims by priority, then run_at, and only the kinds and queues asked for', async () => {
    const low = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'low' }, { priority: 10 });
    const high = await q.enqueue(t.db, syncProfile, { userId: 2, name: 'high' }, { priority: -10 });
    const mail = await q.enqueue(t.db, sendEmail, email());
    const onlyProfiles = await claim({ leases: [LEASES[1]!], limit: 1 });
    expect(onlyProfiles.jobs.map((j) => j.id)).toEqual([high.id]);
    const onlyEmails = await claim({ queues: ['emails'] });
    expect(onlyEmails.jobs.map((j) => j.id)).toEqual([mail.id]);
    const rest = await claim();
    expect(rest.jobs.map((j) => j.id)).toEqual([low.id]);
  });

  it('returns a batch in claim order, ids compared as numbers (9 before 10)', async () => {
    await t.admin.query(`truncate "${t.schema}".jobs restart identity`);
    const ids = (
      await q.enqueueMany(
        t.db,
        Array.from({ length: 12 }, (_, i) => sendEmail.with(email(i))),
      )
    ).map((r) => r.id);
    const { jobs } = await claim({ limit: 12 });
    expect(jobs.map((j) => j.id)).toEqual([...ids].sort((a, b) => Number(a) - Number(b)));
  });

  it("answers each job's fields, its optional ones only when set (alone, together, or none)", async () => {
    await t.admin.query(`truncate "${t.schema}".jobs restart identity`);
    const ids = (
      await q.enqueueMany(
        t.db,
        Array.from({ length: 8 }, (_, i) => sendEmail.with(email(i), { priority: i })),
      )
    ).map((r) => r.id);
    const set = (id: string | undefined, columns: string) =>
      t.admin.query(`update "${t.schema}".jobs set ${columns} where id = $1`, [id]);
    await set(ids[1], `correlation_id = 'corr-1'`);
    await set(ids[2], `ordering_key = 'key-2'`);
    await set(ids[3], `destination = 'dest-3'`);
    await set(ids[4], `progress = '{"pct": 40}'`);
    await set(ids[5], `trace_context = '{"traceparent": "00-ab-cd-01"}'`);
    // A JSON null is no progress, as before.
    await set(ids[6], `progress = 'null'`);
    await set(
      ids[7],
      `correlation_id = 'corr-7', ordering_key = 'key-7', destination = 'dest-7', progress = '[1]', trace_context = '{"tracestate": "x"}'`,
    );
    const { jobs } = await claim({ limit: 10 });
    const leaseToken = jobs[0]?.leaseToken;
    const base = (i: number) => ({
      id: ids[i],
      kind: 'send-email',
      queue: 'emails',
      payload: { ...email(i), body: '' },
      priority: i,
      attempt: 1,
      maxAttempts: 3,
      leaseToken,
      correlationId: null,
    });
    expect(jobs).toStrictEqual([
      base(0),
      { ...base(1), correlationId: 'corr-1' },
      { ...base(2), orderingKey: 'key-2' },
      { ...base(3), destination: 'dest-3' },
      { ...base(4), progress: { pct: 40 } },
      { ...base(5), traceContext: { traceparent: '00-ab-cd-01' } },
      base(6),
      {
        ...base(7),
        correlationId: 'corr-7',
        orderingKey: 'key-7',
        destination: 'dest-7',
        progress: [1],
        traceContext: { tracestate: 'x' },
      },
    ]);
    expect(leaseToken).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('gives each job of a claim over several kinds and queues its own kind, queue and numbers', async () => {
    await t.admin.query(`truncate "${t.schema}".jobs restart identity`);
    const a = await q.enqueue(t.db, sendEmail, email(1), { priority: 2 });
    const b = await q.enqueue(t.db, syncProfile, { userId: 1, name: 'b' }, { priority: 1, correlationId: 'corr-b' });
    const c = await q.enqueue(t.db, sendEmail, email(2), { priority: 3, maxAttempts: 7 });
    const d = await q.enqueue(t.db, syncProfile, { userId: 2, name: 'd' }, { priority: 0 });
    await t.admin.query(`update "${t.schema}".jobs set attempt = 2, max_attempts = 5 where id = $1`, [d.id]);
    const { jobs } = await claim();
    const fields = jobs.map(({ id, kind, queue, payload, priority, attempt, maxAttempts, correlationId }) => ({
      id,
      kind,
      queue,
      payload,
      priority,
      attempt,
      maxAttempts,
      correlationId,
    }));
    const profile = { kind: 'sync-profile', queue: 'default', maxAttempts: 25, correlationId: null };
    const mail = { kind: 'send-email', queue: 'emails', maxAttempts: 3, correlationId: null };
    expect(fields).toStrictEqual([
      { ...profile, id: d.id, payload: { userId: 2, name: 'd' }, priority: 0, attempt: 3, maxAttempts: 5 },
      { ...profile, id: b.id, payload: { userId: 1, name: 'b' }, priority: 1, attempt: 1, correlationId: 'corr-b' },
      { ...mail, id: a.id, payload: { ...email(1), body: '' }, priority: 2, attempt: 1 },
      { ...mail, id: c.id, payload: { ...email(2), body: '' }, priority: 3, attempt: 1, maxAttempts: 7 },
    ]);
  });

  it('sets the lease from the database clock: now + the kind lease', async () => {
    await q.enqueue(t.db, sendEmail, email());
    const [job] = (await claim({ leases: [{ kind: 'send-email', leaseMs: 45_000 }] })).jobs;
    const r = await row(job!.id);
    const leaseSeconds = (r.lease_expires_at.getTime() - r.attempted_at.getTime()) / 1000;
    expect(leaseSeconds).toBeCloseTo(45, 3);
    expect(r.locked_by).toBe('inv-a');
  });
});

describe(`fencing and lease expiry (${testDriver()})`, () => {
  it('the next claim writes the last batch and reports only the exceptions: lost leases and jobs that did not complete', async () => {
    const ids = (
      await q.enqueueMany(
        t.db,
        [0, 1, 2, 3].map((i) => sendEmail.with(email(i))),
      )
    ).map((r) => r.id);
    const first = await claim({ invocationId: 'first', limit: 4 });
    expect(first.jobs.map((j) => j.id)).toEqual(ids);
    // The leases expire and another invocation takes one of the jobs over.
    const thief = await claim({ invocationId: 'thief', limit: 1, now: later(60_000) });
    const stolen = thief.jobs[0]!.id;
    const [a, b, c] = ids.filter((id) => id !== stolen) as [string, string, string];
    const token = first.jobs[0]!.leaseToken;
    expect(first.jobs.every((j) => j.leaseToken === token)).toBe(true);
    expect(thief.jobs[0]!.leaseToken).not.toBe(token);

    // Completions alone (the lean path): the stolen job is reported lost, the other completed.
    const lean = await claim({
      invocationId: 'first',
      limit: 1,
      settle: [stolen, a].map((id) => ({ id, leaseToken: token, outcome: 'completed' as const })),
    });
    expect([...lean.settled.lost]).toEqual([stolen]);
    expect(lean.settled.changed.size).toBe(0);
    // Mixed outcomes: a retry, a dead job and a completion; only the first two are reported.
    const mixed = await claim({
      invocationId: 'first',
      limit: 1,
      settle: [
        { id: b, leaseToken: token, outcome: 'retry', delayMs: 60_000, error: failure },
        { id: c, leaseToken: token, outcome: 'dead', reason: 'http_4xx', error: failure },
        { id: stolen, leaseToken: token, outcome: 'completed' },
      ],
    });
    expect([...mixed.settled.lost]).toEqual([stolen]);
    expect(mixed.settled.changed.get(b)).toMatchObject({ state: 'queued', deadReason: null });
    expect(mixed.settled.changed.get(c)).toMatchObject({ state: 'dead', deadReason: 'http_4xx' });
    expect(mixed.settled.changed.size).toBe(2);
    const state = async (id: string) => {
      const r = await row(id);
      return [r.state, r.locked_by];
    };
    expect(await state(stolen)).toEqual(['running', 'thief']);
    expect(await state(a)).toEqual(['completed', 'first']);
    expect(await state(b)).toEqual(['queued', 'first']);
    expect(await state(c)).toEqual(['dead', 'first']);
  });

  it("a stale holder's complete, fail, extend, progress and release affect nothing; the new holder's result stands", async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email());
    const [old] = (await claim({ invocationId: 'old' })).jobs;
    // The old holder's lease expires; another invocation rescues the job.
    const rescue = await claim({ invocationId: 'new', now: later(60_000) });
    const [fresh] = rescue.jobs;
    expect(fresh?.id).toBe(id);
    expect(fresh?.leaseToken).not.toBe(old?.leaseToken);
    const stale = { id, leaseToken: old!.leaseToken };

    expect(await settleJobs(t.db.executor, t.schema, [{ ...stale, outcome: 'completed' }])).toEqual([]);
    expect(
      await settleJobs(t.db.executor, t.schema, [{ ...stale, outcome: 'retry', delayMs: 0, error: failure }]),
    ).toEqual([]);
    expect(
      await settleJobs(t.db.executor, t.schema, [{ ...stale, outcome: 'dead', reason: 'x', error: failure }]),
    ).toEqual([]);
    expect(await extendLease(t.db.executor, t.schema, stale, 600_000)).toBeNull();
    expect(await reportProgress(t.db.executor, t.schema, stale, { pct: 99 })).toBe(false);
    expect(await releaseJobs(t.db.executor, t.schema, [stale])).toEqual([]);
    const during = await row(id);
    expect(during).toMatchObject({
      state: 'running',
      locked_by: 'new',
      lease_token: fresh!.leaseToken,
      progress: null,
      attempt: 2,
    });

    expect(await reportProgress(t.db.executor, t.schema, { id, leaseToken: fresh!.leaseToken }, { pct: 50 })).toBe(
      true,
    );
    const settled = await settleJobs(t.db.executor, t.schema, [
      { id, leaseToken: fresh!.leaseToken, outcome: 'completed' },
    ]);
    expect(settled.map((s) => s.state)).toEqual(['completed']);
    // Even after completion, the stale token changes nothing.
    expect(
      await settleJobs(t.db.executor, t.schema, [{ ...stale, outcome: 'retry', delayMs: 0, error: failure }]),
    ).toEqual([]);
    expect(await row(id)).toMatchObject({ state: 'completed', progress: { pct: 50 } });
  });

  it('a rescue counts an attempt and records lease_expired; exhausting attempts that way ends dead(lease_expired)', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email()); // maxAttempts 3
    const first = await claim();
    let now = Date.now();
    expect(first.jobs[0]?.attempt).toBe(1);
    for (const expected of [2, 3]) {
      now += 60_000;
      const again = await claim({ now: new Date(now) });
      expect(again.jobs[0]?.attempt).toBe(expected);
    }
    now += 60_000;
    const last = await claim({ now: new Date(now) });
    expect(last.jobs).toEqual([]); // no attempt left: never rescued
    const buried = await buryDoomed(t.db.executor, t.schema, { kinds: ['send-email'], limit: 10, now: new Date(now) });
    expect(buried).toEqual([expect.objectContaining({ id, reason: 'lease_expired', attempt: 3 })]);
    const r = await row(id);
    expect(r).toMatchObject({ state: 'dead', dead_reason: 'lease_expired', attempt: 3 });
    expect(r.last_error.class).toBe('lease_expired');
    expect(r.errors.map((e: { class: string }) => e.class)).toEqual([
      'lease_expired',
      'lease_expired',
      'lease_expired',
    ]);
    expect(r.finished_at).not.toBeNull();
  });

  it('rescues come first: a backlog of ready jobs does not starve an expired lease', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email(0));
    await claim({ limit: 1 });
    await q.enqueueMany(
      t.db,
      Array.from({ length: 20 }, (_, i) => sendEmail.with(email(i + 1))),
    );
    const rescue = await claim({ limit: 5, now: later(60_000) });
    expect(rescue.jobs.map((j) => j.id)).toContain(id);
    expect(rescue.jobs).toHaveLength(5);
  });

  it('an unexpired lease is never taken over', async () => {
    await q.enqueue(t.db, sendEmail, email());
    await claim();
    expect((await claim({ now: later(29_000) })).jobs).toEqual([]);
  });

  it('extendLease pushes the expiry so a rescuer does not take the job', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email());
    const [job] = (await claim()).jobs;
    // On a supplied database clock: the new expiry is exactly that moment plus the extension.
    const at = later(1_000);
    const until = await extendLease(t.db.executor, t.schema, { id, leaseToken: job!.leaseToken }, 120_000, at);
    expect(until?.getTime()).toBe(at.getTime() + 120_000);
    expect((await claim({ now: new Date(at.getTime() + 60_000) })).jobs).toEqual([]);
  });
});

describe(`outcomes (${testDriver()})`, () => {
  it('completes a whole batch in one statement', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 5 }, (_, i) => sendEmail.with(email(i))),
    );
    const { jobs } = await claim();
    const settled = await settleJobs(
      t.db.executor,
      t.schema,
      jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const })),
    );
    expect(settled.map((s) => s.state)).toEqual(Array(5).fill('completed'));
    const { rows } = await t.admin.query(
      `select count(*)::int as n from "${t.schema}".jobs where state = 'completed' and finished_at is not null and lease_expires_at is null`,
    );
    expect(rows[0].n).toBe(5);
  });

  it('retry waits its delay on the database clock and keeps the error; then it is claimable again', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email());
    const [job] = (await claim()).jobs;
    const [settled] = await settleJobs(t.db.executor, t.schema, [
      {
        id,
        leaseToken: job!.leaseToken,
        outcome: 'retry',
        delayMs: 30_000,
        error: { ...failure, responseStatus: 503, responseBody: 'busy' },
      },
    ]);
    expect(settled?.state).toBe('queued');
    const r = await row(id);
    expect((r.run_at.getTime() - r.updated_at.getTime()) / 1000).toBeCloseTo(30, 3);
    expect(r.last_error).toMatchObject({ message: 'boom', responseStatus: 503, responseBody: 'busy' });
    expect((await claim()).jobs).toEqual([]);
    const retried = await claim({ now: later(31_000) });
    expect(retried.jobs.map((j) => [j.id, j.attempt])).toEqual([[id, 2]]);
  });

  it('a retry after the last attempt goes to the DLQ as max_attempts', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email(), { maxAttempts: 1 });
    const [job] = (await claim()).jobs;
    const [settled] = await settleJobs(t.db.executor, t.schema, [
      { id, leaseToken: job!.leaseToken, outcome: 'retry', delayMs: 0, error: failure },
    ]);
    expect(settled).toMatchObject({ state: 'dead', deadReason: 'max_attempts' });
  });

  it('dead and cancelled outcomes are final', async () => {
    const a = await q.enqueue(t.db, sendEmail, email(1));
    const b = await q.enqueue(t.db, sendEmail, email(2));
    const { jobs } = await claim();
    const token = (id: string) => jobs.find((j) => j.id === id)!.leaseToken;
    const settled = await settleJobs(t.db.executor, t.schema, [
      {
        id: a.id,
        leaseToken: token(a.id),
        outcome: 'dead',
        reason: 'http_4xx',
        error: { class: 'DiscardError', message: '404' },
      },
      { id: b.id, leaseToken: token(b.id), outcome: 'cancelled' },
    ]);
    expect(settled.map((s) => [s.id, s.state, s.deadReason]).sort()).toEqual(
      [
        [a.id, 'dead', 'http_4xx'],
        [b.id, 'cancelled', null],
      ].sort(),
    );
  });

  it('release gives unstarted jobs back: no attempt counted, claimable at once', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email());
    const [job] = (await claim()).jobs;
    expect(await releaseJobs(t.db.executor, t.schema, [{ id, leaseToken: job!.leaseToken }])).toEqual([id]);
    expect(await row(id)).toMatchObject({ state: 'queued', attempt: 0, started_at: null, lease_expires_at: null });
    const [again] = (await claim()).jobs;
    expect(again?.attempt).toBe(1);
  });

  it('a job past its deadline is never handed out; buryDoomed sends it to the DLQ as deadline_exceeded', async () => {
    const { id } = await q.enqueue(t.db, sendEmail, email(), { deadline: later(10_000) });
    const result = await claim({ now: later(20_000) });
    expect(result.jobs).toEqual([]);
    const buried = await buryDoomed(t.db.executor, t.schema, { kinds: ['send-email'], limit: 10, now: later(20_000) });
    expect(buried).toEqual([expect.objectContaining({ id, reason: 'deadline_exceeded' })]);
    expect(await row(id)).toMatchObject({ state: 'dead', dead_reason: 'deadline_exceeded', attempt: 0 });
  });
});
