import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError } from '../../base/errors.js';
import { declaredWindows, defineJob, defineQueue } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { buryDoomed } from '../../db/statements/bury.js';
import { claimJobs } from '../../db/statements/claim.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('run_windows', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

// Heavy exports only at night in Berlin; a queue of bulk mail only during the UTC working day.
const nightly = defineJob({
  kind: 'export',
  payload: z.object({ n: z.number() }),
  runWindow: { start: '23:00', end: '06:00', timezone: 'Europe/Berlin' },
});
const bulk = defineQueue({ name: 'bulk', runWindow: { start: '09:00', end: '17:30' } });
const mail = defineJob({ kind: 'mail', queue: bulk, payload: z.object({ n: z.number() }) });
const always = defineJob({ kind: 'ping', payload: z.object({ n: z.number() }) });
const windows = declaredWindows([nightly, mail, always]);
const leasesOf = (leaseMs: number) => ['export', 'mail', 'ping'].map((kind) => ({ kind, leaseMs }));
// The jobs are enqueued on the real clock (November 2026); the claims run at these later moments.
const claim = (iso: string, leaseMs = 86_400_000) =>
  claimJobs(t.db.executor, t.schema, {
    leases: leasesOf(leaseMs),
    limit: 10,
    invocationId: 'inv',
    windows,
    now: new Date(iso),
  });
const kindsOf = (jobs: { kind: string }[]) => jobs.map((j) => j.kind).sort();

describe(`run windows (${testDriver()})`, () => {
  it('outside its window a job is not claimed and keeps its attempts; inside, it runs', async () => {
    await q.enqueueMany(t.db, [nightly.with({ n: 1 }), mail.with({ n: 2 }), always.with({ n: 3 })]);
    // 12:00 UTC = 13:00 in Berlin (CET): bulk is open, exports are not.
    expect(kindsOf((await claim('2027-01-05T12:00:00Z')).jobs)).toEqual(['mail', 'ping']);
    const waiting = await t.admin.query(`select kind, state, attempt from "${t.schema}".jobs where kind = 'export'`);
    expect(waiting.rows).toEqual([{ kind: 'export', state: 'queued', attempt: 0 }]);
    // 21:59 UTC = 22:59 in Berlin: still shut. 22:00 UTC = 23:00: open.
    expect((await claim('2027-01-05T21:59:00Z')).jobs).toEqual([]);
    expect(kindsOf((await claim('2027-01-05T22:00:00Z')).jobs)).toEqual(['export']);
  });

  it('the window wraps past midnight and follows the time zone across a DST change; a rescue waits for it too', async () => {
    await q.enqueueMany(t.db, [nightly.with({ n: 1 })]);
    // 04:59 in Berlin in summer (CEST) is 02:59 UTC: open; the lease runs out a second later.
    const [job] = (await claim('2027-07-01T02:59:00Z', 1_000)).jobs;
    expect(job?.kind).toBe('export');
    // 06:00 CEST = 04:00 UTC: shut — the expired lease is not rescued.
    expect((await claim('2027-07-01T04:00:00Z', 1_000)).jobs).toEqual([]);
    // 23:00 CEST = 21:00 UTC: open again, and the rescue is the job's second attempt.
    const rescued = (await claim('2027-07-01T21:00:00Z', 1_000)).jobs;
    expect(rescued.map((j) => [j.kind, j.attempt])).toEqual([['export', 2]]);
  });

  it('a deadline still applies outside the window: the job goes to the DLQ', async () => {
    await q.enqueueMany(t.db, [nightly.with({ n: 1 }, { deadline: new Date(Date.now() + 60_000) })]);
    const buried = await buryDoomed(t.db.executor, t.schema, {
      kinds: ['export'],
      limit: 10,
      now: new Date(Date.now() + 120_000),
    });
    expect(buried.map((b) => b.reason)).toEqual(['deadline_exceeded']);
  });

  it("a worker applies its kinds' windows: shut now, the job waits with its attempts; another kind runs", async () => {
    // A window that opens two hours from now (UTC) and lasts an hour: shut at any time of day.
    const hhmm = (h: number) => `${String((new Date().getUTCHours() + h) % 24).padStart(2, '0')}:00`;
    const later = defineJob({
      kind: 'later',
      payload: z.object({}),
      runWindow: { start: hhmm(2), end: hhmm(3) },
      handler: () => {},
    });
    const now = defineJob({ kind: 'now', payload: z.object({}), handler: () => {} });
    await q.enqueueMany(t.db, [later.with({}), now.with({})]);
    const worker = createWorker({ db: t.db, schema: t.schema, jobs: [later, now], logger: silentLogger });
    expect(await worker.runInvocation({ remainingMs: 120_000 })).toMatchObject({ claimed: 1, completed: 1 });
    const left = await t.admin.query(`select kind, state, attempt from "${t.schema}".jobs where state <> 'completed'`);
    expect(left.rows).toEqual([{ kind: 'later', state: 'queued', attempt: 0 }]);
  });

  it('refuses a malformed window with a clear ConfigError', () => {
    const payload = z.object({});
    const bad: [unknown, RegExp][] = [
      [{ start: '25:00', end: '06:00' }, /runWindow.start must be a time like "23:00"/],
      [{ start: '23:00', end: '6:00' }, /runWindow.end must be a time/],
      [{ start: '23:00', end: '23:00' }, /start and end must differ/],
      [{ start: '23:00', end: '06:00', timezone: 'Nowhere/Land' }, /not an IANA time zone/],
    ];
    for (const [runWindow, message] of bad) {
      expect(() => defineJob({ kind: 'k', payload, runWindow: runWindow as never })).toThrow(ConfigError);
      expect(() => defineQueue({ name: 'q', runWindow: runWindow as never })).toThrow(message);
    }
  });
});
