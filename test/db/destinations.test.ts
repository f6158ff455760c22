import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../base/outcomes.js';
import { BREAKER_DEFAULTS } from '../../core/destinations.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { listDestinations, resetDestination } from '../../db/statements/destinations.js';
import { extendLease } from '../../db/statements/settle.js';
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
  claimJobs(t.db.db, t.schema, { leases: LEASES, limit: 100, invocationId: 'inv', now, ...overrides });
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
const health = async (name: string, now = at(2_500)) => (await listDestinations(t.db.db, t.schema, { name, now }))[0];

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
          claimJobs(c.db, t.schema, { leases: LEASES, limit: 10, invocationId: `c${i}`, now: at(31_001) }),
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
    expect(await extendLease(t.db.db, t.schema, probe.jobs[0] as Claimed, 120_000, at(40_000))).toEqual(at(160_000));
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
      const during = await claimJobs(other.db, t.schema, {
        leases: LEASES,
        limit: 100,
        invocationId: 'x',
        now: at(60_000),
      });
      expect(await destinationsOf(during.jobs)).toEqual(Array(10).fill('up.example'));
      const after = await claimJobs(other.db, t.schema, {
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
      await resetDestination(t.db.db, t.schema, { name: 'down.example', by: 'ops@example.com', now: at(2_000) }),
    ).toBe('open');
    expect(await health('down.example')).toMatchObject({
      state: 'closed',
      deferredUntil: null,
      changedBy: 'ops@example.com',
    });
    expect(await destinationsOf((await claim(at(3_000), { limit: 100 })).jobs)).toHaveLength(20);
    expect(await resetDestination(t.db.db, t.schema, { name: 'nobody.example', by: 'ops' })).toBeNull();
  });
});
