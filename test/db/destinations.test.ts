import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Outcome } from '../../base/outcomes.js';
import { BREAKER_DEFAULTS } from '../../core/destinations.js';
import { defineJob } from '../../core/jobs.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { cancelJobs } from '../../db/statements/commands.js';
import { listDestinations, resetDestination } from '../../db/statements/destinations.js';
import { setLimit } from '../../db/statements/limits-admin.js';
import { setRateLimit } from '../../db/statements/rate-limits-admin.js';
import { extendLease, releaseJobs } from '../../db/statements/settle.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('destinations', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [{ kind: 'send-email', leaseMs: 30_000 }];
const { at } = useSuppliedClock();
const claim = (now: Date, overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 100, invocationId: 'inv', now, ...overrides });
const email = (i: number) => ({ to: `u${i}@example.com`, subject: 's' });
const BREAKER = { ...BREAKER_DEFAULTS };
type Claimed = { id: string; leaseToken: string };
/** An attempt against `destination` that failed (a 5xx, a timeout) and will be retried. */
const failed = (j: Claimed, destination: string, deferMs: number | null = null): Outcome => ({
  id: j.id,
  leaseToken: j.leaseToken,
  outcome: 'retry',
  delayMs: 0,
  error: { class: 'retry', message: 'receiver answered 503', responseStatus: 503 },
  destination: { name: destination, failed: true, deferMs, breaker: BREAKER },
});
const ok = (j: Claimed, destination: string): Outcome => ({
  id: j.id,
  leaseToken: j.leaseToken,
  outcome: 'completed',
  destination: { name: destination, failed: false, deferMs: null, breaker: BREAKER },
});
const destinationsOf = async (jobs: { id: string }[]) =>
  (
    await t.admin.query(`select destination from "${t.schema}".jobs where id = any($1::bigint[]) order by id`, [
      jobs.map((j) => j.id),
    ])
  ).rows.map((r) => r.destination as string);
const health = async (name: string, now = at(2_500)) =>
  (await listDestinations(t.db.executor, t.schema, { name, now }))[0];

/** 10 jobs for each of two partners. */
async function twoPartners() {
  await q.enqueueMany(t.db, [
    ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { destination: 'down.example' })),
    ...Array.from({ length: 10 }, (_, i) => sendEmail.with(email(i), { destination: 'up.example' })),
  ]);
}

describe(`circuit breakers (${testDriver()})`, () => {
  it('opens after the threshold and stops claims for that destination only, without consuming attempts', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    expect(await destinationsOf(first.jobs)).toEqual(Array(5).fill('down.example'));
    // Four failures: under the threshold (5), the breaker stays closed.
    const four = await claim(at(1_000), {
      limit: 0,
      settle: first.jobs.slice(0, 4).map((j) => failed(j, 'down.example')),
    });
    expect(four.moves).toEqual([]);
    expect((await health('down.example'))?.state).toBe('closed');
    // The fifth opens it (5 of 5 attempts failed), and the same statement's claim already leaves the
    // destination out: every job it takes is for the other partner.
    const fifth = await claim(at(2_000), { limit: 100, settle: [failed(first.jobs[4] as Claimed, 'down.example')] });
    expect(fifth.moves).toEqual([
      expect.objectContaining({ destination: 'down.example', from: 'closed', to: 'open', failures: 5, calls: 5 }),
    ]);
    expect(await destinationsOf(fifth.jobs)).toEqual(Array(10).fill('up.example'));
    // The five failed jobs wait for their retry, the five never started: none is claimed while it is
    // open, and none burns an attempt meanwhile.
    expect((await claim(at(10_000))).jobs).toEqual([]);
    const attempts = await t.admin.query(
      `select attempt, count(*)::int as n from "${t.schema}".jobs where destination = 'down.example' and state = 'queued' group by attempt order by attempt`,
    );
    expect(attempts.rows).toEqual([
      { attempt: 0, n: 5 },
      { attempt: 1, n: 5 },
    ]);
    const h = await health('down.example');
    expect(h).toMatchObject({ state: 'open', trips: 1, openedAt: at(2_000), nextProbeAt: at(2_000 + 30_000) });
  });

  it('a high failure count under the failure rate does not open it (10 % of 200 attempts failing)', async () => {
    await q.enqueueMany(
      t.db,
      Array.from({ length: 200 }, (_, i) => sendEmail.with(email(i), { destination: 'busy.example' })),
    );
    const jobs = (await claim(at(0), { limit: 200 })).jobs;
    const outcomes = jobs.map((j, i) => (i % 10 === 0 ? failed(j, 'busy.example') : ok(j, 'busy.example')));
    // Successes first, so the failures arrive with the window's calls already counted.
    const result = await claim(at(1_000), { limit: 0, settle: outcomes.filter((o) => o.outcome === 'completed') });
    expect(result.moves).toEqual([]);
    const second = await claim(at(2_000), { limit: 0, settle: outcomes.filter((o) => o.outcome !== 'completed') });
    expect(second.moves).toEqual([]);
    expect(await health('busy.example', at(3_000))).toMatchObject({ state: 'closed', failures: 20, calls: 200 });
  });

  it('after the cool-down exactly one probe goes through, also with 8 claimers racing for it', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    await claim(at(1_000), { limit: 0, settle: first.jobs.map((j) => failed(j, 'down.example')) });
    expect((await health('down.example'))?.state).toBe('open');
    // Before the cool-down ends, nothing for it.
    expect(await destinationsOf((await claim(at(30_000), { limit: 100 })).jobs)).toEqual(Array(10).fill('up.example'));
    const claimers = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    try {
      const results = await Promise.all(
        claimers.map((c, i) =>
          claimJobs(c.executor, t.schema, { leases: LEASES, limit: 10, invocationId: `c${i}`, now: at(31_001) }),
        ),
      );
      const probes = results.flatMap((r) => r.jobs);
      expect(probes).toHaveLength(1);
      expect(results.flatMap((r) => r.probes)).toEqual([{ destination: 'down.example', jobId: probes[0]?.id }]);
      expect(await health('down.example')).toMatchObject({ state: 'half_open', probeJobId: probes[0]?.id });
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
    // While the probe runs, nothing else for the destination.
    expect((await claim(at(32_000))).jobs).toEqual([]);
  });

  it('a failed probe reopens it for twice as long; a successful one closes it', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    await claim(at(1_000), { limit: 0, settle: first.jobs.map((j) => failed(j, 'down.example')) });
    const others = (await claim(at(2_000), { limit: 100 })).jobs; // the other partner's jobs, done at once
    const probe = (await claim(at(31_001), { limit: 10, settle: others.map((j) => ok(j, 'up.example')) })).jobs;
    expect(probe).toHaveLength(1);
    const reopened = await claim(at(32_000), { limit: 10, settle: [failed(probe[0] as Claimed, 'down.example')] });
    expect(reopened.jobs).toEqual([]);
    expect(reopened.moves).toEqual([
      expect.objectContaining({
        destination: 'down.example',
        from: 'half_open',
        to: 'open',
        openUntil: at(32_000 + 60_000),
      }),
    ]);
    expect(await health('down.example')).toMatchObject({ trips: 2, nextProbeAt: at(92_000) });
    expect((await claim(at(91_000), { limit: 10 })).jobs).toEqual([]);
    const second = (await claim(at(92_001), { limit: 10 })).jobs;
    expect(second).toHaveLength(1);
    const closed = await claim(at(93_000), { limit: 10, settle: [ok(second[0] as Claimed, 'down.example')] });
    expect(closed.moves).toEqual([expect.objectContaining({ from: 'half_open', to: 'closed' })]);
    // Closed: the rest of its jobs (the five never tried, the retries due) come back at once.
    expect(await destinationsOf(closed.jobs)).toEqual(Array(9).fill('down.example'));
    expect(await health('down.example')).toMatchObject({ state: 'closed', trips: 0, failures: 0, calls: 0 });
  });

  it('a probe whose invocation died is rescued as the next probe once its lease ran out (no other job left)', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    await claim(at(1_000), { limit: 0, settle: first.jobs.map((j) => failed(j, 'down.example')) });
    // Only the five failed jobs are left for the partner.
    await t.admin.query(
      `delete from "${t.schema}".jobs where destination = 'down.example' and attempt = 0 and state = 'queued'`,
    );
    const others = (await claim(at(2_000), { limit: 100 })).jobs;
    const probe = await claim(at(31_001), { limit: 10, settle: others.map((j) => ok(j, 'up.example')) });
    expect(probe.jobs).toHaveLength(1);
    // Its invocation dies; the other four wait for their turn, which never comes while it is half-open.
    const rescue = await claim(at(61_002), { limit: 10 });
    expect(rescue.jobs.map((j) => [j.id, j.attempt])).toEqual([[probe.jobs[0]?.id, 3]]);
    expect(rescue.probes).toEqual([{ destination: 'down.example', jobId: probe.jobs[0]?.id }]);
    expect(await health('down.example', at(61_002))).toMatchObject({
      state: 'half_open',
      probeJobId: probe.jobs[0]?.id,
      probeUntil: at(61_002 + 30_000),
    });
  });

  it('the turn to probe goes only to a job the claim takes; extendLease extends the turn', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    await claim(at(1_000), { limit: 0, settle: first.jobs.map((j) => failed(j, 'down.example')) });
    const others = (await claim(at(2_000), { limit: 100 })).jobs;
    await claim(at(3_000), { limit: 0, settle: others.map((j) => ok(j, 'up.example')) });
    // One job of the queue runs, and the queue may run one: the probe candidate is left out by the
    // limit, so no turn is taken (the breaker stays open, no phantom probe).
    await q.enqueueMany(t.db, [sendEmail.with(email(99), { destination: 'up.example' })]);
    const [busy] = (await claim(at(4_000), { limit: 1 })).jobs;
    expect(busy).toBeDefined();
    const limits = [{ scope: 'queue' as const, name: 'emails', maxRunning: 1 }];
    const held = await claim(at(31_001), { limit: 10, limits });
    expect(held.jobs).toEqual([]);
    expect(held.probes).toEqual([]);
    expect((await health('down.example', at(31_001)))?.state).toBe('open');
    // Without the limit the probe goes; its lease, extended, keeps the turn past the first 30 s.
    const probe = await claim(at(32_000), { limit: 10, settle: [ok(busy as Claimed, 'up.example')] });
    expect(probe.jobs).toHaveLength(1);
    expect(await extendLease(t.db.executor, t.schema, probe.jobs[0] as Claimed, 120_000, at(40_000))).toEqual(
      at(160_000),
    );
    expect(await health('down.example', at(40_000))).toMatchObject({ state: 'half_open', probeUntil: at(160_000) });
    expect((await claim(at(70_000), { limit: 10 })).jobs).toEqual([]);
  });

  it('a Retry-After defers the whole destination for every invocation, then its jobs come back', async () => {
    await twoPartners();
    const [one] = (await claim(at(0), { limit: 1 })).jobs;
    // One 429 with Retry-After: 120 s (not a failure: the breaker stays closed).
    const deferral: Outcome = {
      ...failed(one as Claimed, 'down.example', 120_000),
      destination: { name: 'down.example', failed: false, deferMs: 120_000, breaker: BREAKER },
    };
    await claim(at(1_000), { limit: 0, settle: [deferral] });
    expect(await health('down.example')).toMatchObject({ state: 'closed', deferredUntil: at(121_000) });
    const other = openDb({ max: 1 });
    try {
      const during = await claimJobs(other.executor, t.schema, {
        leases: LEASES,
        limit: 100,
        invocationId: 'x',
        now: at(60_000),
      });
      expect(await destinationsOf(during.jobs)).toEqual(Array(10).fill('up.example'));
      const after = await claimJobs(other.executor, t.schema, {
        leases: LEASES,
        limit: 100,
        invocationId: 'x',
        now: at(121_001),
        settle: during.jobs.map((j) => ok(j, 'up.example')),
      });
      expect(await destinationsOf(after.jobs)).toEqual(Array(10).fill('down.example'));
    } finally {
      await other.close();
    }
  });

  it('a reset closes the breaker and ends the deferral at once; an unknown destination says so', async () => {
    await twoPartners();
    const first = await claim(at(0), { limit: 5 });
    await claim(at(1_000), { limit: 0, settle: first.jobs.map((j) => failed(j, 'down.example', 600_000)) });
    expect((await health('down.example'))?.state).toBe('open');
    expect(
      await resetDestination(t.db.executor, t.schema, { name: 'down.example', by: 'ops@example.com', now: at(2_000) }),
    ).toBe('open');
    expect(await health('down.example')).toMatchObject({
      state: 'closed',
      deferredUntil: null,
      changedBy: 'ops@example.com',
    });
    expect(await destinationsOf((await claim(at(3_000), { limit: 100 })).jobs)).toHaveLength(20);
    expect(await resetDestination(t.db.executor, t.schema, { name: 'nobody.example', by: 'ops' })).toBeNull();
  });
});

// Every claim shape must hand the half-open turn only to a job it takes. The shapes are composed from
// pieces, and each one defers to a richer shape when it finds a rule it does not handle: a turn given
// by a claim that then took nothing left the destination blocked (issue: a run-time rate and a kind's
// concurrency, on a fresh worker, whose first claim is the limited one).
describe(`the half-open probe under every combination of rules (${testDriver()})`, () => {
  const job = (kind: string) => defineJob({ kind, payload: z.object({ n: z.number() }) });
  const [a, b, x] = [job('a'), job('b'), job('x')];
  const leases = [
    { kind: 'a', leaseMs: 30_000 },
    { kind: 'b', leaseMs: 30_000 },
    { kind: 'x', leaseMs: 120_000 },
  ];
  const breaker = { ...BREAKER_DEFAULTS, failures: 2, coolDownMs: 1_000 };
  const D = 'd.example';
  type Rules = {
    /** Kind X runs one job at a time, as its code declares (`concurrency: 1`) or as set at run time. */
    limit?: 'declared' | 'run-time';
    /** A rate: on a queue nothing here uses (run-time), or on kind X (declared). */
    rate?: 'declared' | 'run-time';
    /** B's jobs share an ordering key: the second waits for the first. */
    ordered?: boolean;
  };
  /** What a fresh worker sends for these rules: the declared ones, no hint from an earlier claim. */
  const requestFor = (rules: Rules, overrides: Partial<ClaimRequest> = {}): Omit<ClaimRequest, 'now'> => ({
    leases,
    limit: 10,
    invocationId: 'w',
    ...(rules.limit === 'declared' ? { limits: [{ scope: 'kind' as const, name: 'x', maxRunning: 1 }] } : {}),
    ...(rules.rate === 'declared'
      ? { rateLimits: [{ scope: 'kind' as const, name: 'x', maxStarts: 10, periodMs: 1_000 }] }
      : {}),
    ...overrides,
  });
  /** A's attempt failed against the destination, and A's job is done with (dead: nothing to retry). */
  const fail = (j: Claimed): Outcome => ({
    id: j.id,
    leaseToken: j.leaseToken,
    outcome: 'dead',
    reason: 'max_attempts',
    error: { class: 'retry', message: 'receiver answered 503', responseStatus: 503 },
    destination: { name: D, failed: true, deferMs: null, breaker },
  });
  const done = (j: Claimed): Outcome => ({
    ...ok(j, D),
    destination: { name: D, failed: false, deferMs: null, breaker },
  });
  const stateOf = async (id: string) =>
    (await t.admin.query(`select state, attempt from "${t.schema}".jobs where id = $1`, [id])).rows[0];

  /**
   * Kind A's two failed attempts open the breaker at(100) until at(1_100); then B's two jobs for the
   * destination and X's one (no destination) are enqueued. Returns their ids.
   */
  async function scenario(rules: Rules) {
    if (rules.limit === 'run-time')
      await setLimit(t.db.executor, t.schema, { scope: 'kind', name: 'x', maxRunning: 1, by: 't' });
    if (rules.rate === 'run-time') {
      await setRateLimit(t.db.executor, t.schema, {
        scope: 'queue',
        name: 'elsewhere',
        maxStarts: 10,
        periodMs: 1_000,
        by: 't',
      });
    }
    await q.enqueueMany(t.db, [a.with({ n: 1 }, { destination: D }), a.with({ n: 2 }, { destination: D })]);
    const tried = await claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(0) });
    expect(tried.jobs).toHaveLength(2);
    const opened = await claimJobs(t.db.executor, t.schema, {
      ...requestFor(rules, { limit: 0, settle: tried.jobs.map(fail) }),
      now: at(100),
    });
    expect(opened.moves).toEqual([expect.objectContaining({ destination: D, from: 'closed', to: 'open' })]);
    const key = rules.ordered ? { orderingKey: 'k' } : {};
    const [b1, b2, x1] = (
      await q.enqueueMany(t.db, [
        b.with({ n: 1 }, { destination: D, ...key }),
        b.with({ n: 2 }, { destination: D, ...key }),
        x.with({ n: 1 }),
      ])
    ).map((r) => r.id as string);
    return { b1: b1 as string, b2: b2 as string, x1: x1 as string };
  }

  const COMBINATIONS: [string, Rules][] = [
    ['no rule but the breaker', {}],
    ['a declared limit', { limit: 'declared' }],
    ['a run-time limit', { limit: 'run-time' }],
    ['a run-time rate', { rate: 'run-time' }],
    ['a declared rate', { rate: 'declared' }],
    [
      'a declared limit and a run-time rate (the limited claim goes first, the rated one follows)',
      { limit: 'declared', rate: 'run-time' },
    ],
    ['a run-time limit and a run-time rate', { limit: 'run-time', rate: 'run-time' }],
    ['a declared limit and a declared rate', { limit: 'declared', rate: 'declared' }],
    ['an ordering key', { ordered: true }],
    ['an ordering key, a declared limit and a run-time rate', { ordered: true, limit: 'declared', rate: 'run-time' }],
  ];

  it.each(COMBINATIONS)(
    '%s: the first claim after the cool-down takes the probe; its turn passes on when it runs out; success closes',
    async (_, rules) => {
      const { b1, b2, x1 } = await scenario(rules);
      // Before the cool-down ends, nothing for the destination.
      const early = await claimJobs(t.db.executor, t.schema, {
        ...requestFor(rules, { leases: leases.slice(0, 2) }),
        now: at(1_000),
      });
      expect(early.jobs).toEqual([]);
      const first = await claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(1_200) });
      expect(first.jobs.map((j) => j.id).sort()).toEqual([b1, x1].sort());
      expect(first.probes).toEqual([{ destination: D, jobId: b1 }]);
      expect(await health(D, at(1_200))).toMatchObject({ state: 'half_open', probeJobId: b1, probeUntil: at(31_200) });
      // While the probe runs, nothing else for the destination, and the other job keeps its attempts.
      const during = await claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(2_000) });
      expect(during.jobs).toEqual([]);
      expect(during.probes).toEqual([]);
      expect(await stateOf(b2)).toEqual({ state: 'queued', attempt: 0 });
      // The probe's invocation dies: when its turn and its lease run out, the next claim rescues it
      // as the probe again, with a new turn.
      const again = await claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(31_201) });
      expect(again.jobs.map((j) => [j.id, j.attempt])).toEqual([[b1, 2]]);
      expect(again.probes).toEqual([{ destination: D, jobId: b1 }]);
      expect(await health(D, at(31_201))).toMatchObject({ state: 'half_open', probeJobId: b1, probeUntil: at(61_201) });
      // It succeeds: the breaker closes, and the same statement's claim takes B's second job (an
      // ordered follower too: the settle releases it).
      const closed = await claimJobs(t.db.executor, t.schema, {
        ...requestFor(rules, {
          settle: [{ ...done(again.jobs[0] as Claimed), ...(rules.ordered ? { orderingKey: 'k' } : {}) }],
        }),
        now: at(32_000),
      });
      expect(closed.moves).toEqual([expect.objectContaining({ destination: D, from: 'half_open', to: 'closed' })]);
      expect(closed.jobs.map((j) => j.id)).toEqual([b2]);
      expect(closed.probes).toEqual([]);
    },
  );

  it('a warm worker that sends the rated claim first takes the probe too', async () => {
    const rules: Rules = { limit: 'declared', rate: 'run-time' };
    const { b1, x1 } = await scenario(rules);
    const first = await claimJobs(t.db.executor, t.schema, {
      ...requestFor(rules, { limited: true, rated: true, ordered: true }),
      now: at(1_200),
    });
    expect(first.jobs.map((j) => j.id).sort()).toEqual([b1, x1].sort());
    expect(first.probes).toEqual([{ destination: D, jobId: b1 }]);
  });

  it('a probe given back unstarted keeps the turn until it runs out, then runs; a cancelled one hands it to the next job', async () => {
    const rules: Rules = { limit: 'declared', rate: 'run-time' };
    const { b1, b2, x1 } = await scenario(rules);
    const claim = (ms: number) => claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(ms) });
    const first = await claim(1_200);
    expect(first.jobs.map((j) => j.id).sort()).toEqual([b1, x1].sort());
    // Its invocation ran out of time before starting it: given back, its attempt taken back.
    const probe = first.jobs.find((j) => j.id === b1) as Claimed;
    expect(await releaseJobs(t.db.executor, t.schema, [probe], at(1_500))).toEqual([b1]);
    expect(await stateOf(b1)).toEqual({ state: 'queued', attempt: 0 });
    expect((await claim(2_000)).jobs).toEqual([]);
    // Its turn ran out: the next claim sends it again.
    const again = await claim(31_201);
    expect(again.jobs.map((j) => [j.id, j.attempt])).toEqual([[b1, 1]]);
    expect(again.probes).toEqual([{ destination: D, jobId: b1 }]);
    // Cancelled while it runs (no outcome reaches the breaker): when the turn runs out, B's next job has it.
    expect(await cancelJobs(t.db.executor, t.schema, [b1], at(32_000))).toEqual([
      expect.objectContaining({ id: b1, cancelled: true }),
    ]);
    expect((await claim(61_000)).jobs).toEqual([]);
    const next = await claim(61_202);
    expect(next.jobs.map((j) => j.id)).toEqual([b2]);
    expect(next.probes).toEqual([{ destination: D, jobId: b2 }]);
    expect(await health(D, at(61_202))).toMatchObject({ state: 'half_open', probeJobId: b2, probeUntil: at(91_202) });
  });

  it('a rate that holds the probe candidate back takes no turn: the breaker stays open, no phantom probe', async () => {
    const rules: Rules = { limit: 'declared', rate: 'run-time' };
    const { b1, x1 } = await scenario(rules);
    // B may start once a minute, and a job of B without a destination just started.
    await setRateLimit(t.db.executor, t.schema, { scope: 'kind', name: 'b', maxStarts: 1, periodMs: 60_000, by: 't' });
    const [solo] = await q.enqueueMany(t.db, [b.with({ n: 0 })]);
    const started = await claimJobs(t.db.executor, t.schema, {
      ...requestFor(rules, { leases: leases.slice(1, 2) }),
      now: at(1_050),
    });
    expect(started.jobs.map((j) => j.id)).toEqual([solo?.id]);
    const held = await claimJobs(t.db.executor, t.schema, { ...requestFor(rules), now: at(1_200) });
    expect(held.jobs.map((j) => j.id)).toEqual([x1]);
    expect(held.probes).toEqual([]);
    expect(await health(D, at(1_200))).toMatchObject({ state: 'open', probeJobId: null });
    expect(await stateOf(b1)).toEqual({ state: 'queued', attempt: 0 });
  });

  it('fresh workers racing with a limit and a run-time rate: exactly one probe runs, and it holds the turn', async () => {
    const rules: Rules = { limit: 'declared', rate: 'run-time' };
    const { b1, x1 } = await scenario(rules);
    const claimers = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    try {
      const results = await Promise.all(
        claimers.map((c, i) =>
          claimJobs(c.executor, t.schema, { ...requestFor(rules, { invocationId: `c${i}` }), now: at(1_200) }),
        ),
      );
      const ids = results.flatMap((r) => r.jobs.map((j) => j.id));
      expect(ids.sort()).toEqual([b1, x1].sort());
      expect(results.flatMap((r) => r.probes)).toEqual([{ destination: D, jobId: b1 }]);
      // Each claimer that reports a probe took it.
      for (const r of results) {
        for (const p of r.probes) expect(r.jobs.map((j) => j.id)).toContain(p.jobId);
      }
      expect(await health(D, at(1_200))).toMatchObject({ state: 'half_open', probeJobId: b1 });
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
  });
});
