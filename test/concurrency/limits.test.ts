// Concurrency limits under many claimers at once: a simulation of concurrent invocations, which
// depends on Postgres's locking, not on the driver that carries the statement. It runs once (pg);
// the statements themselves run on every driver in test/db/limits.test.ts.
import { describe, expect, it } from 'vitest';
import { claimJobs } from '../../db/statements/claim.js';
import type { DeclaredLimit } from '../../db/statements/limits.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail, syncProfile } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;

useTestSchema('limits_concurrency', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const LEASES = [
  { kind: 'send-email', leaseMs: 30_000 },
  { kind: 'sync-profile', leaseMs: 30_000 },
];
const email = (i: number) => ({ to: `u${i}@example.com`, subject: 's' });
const done = (jobs: { id: string; leaseToken: string }[]) =>
  jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));

describe(`limits under concurrency (${testDriver()})`, () => {
  it('8 claimers on separate connections never run more than a queue limit, a kind limit or a per-key limit', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    await q.enqueueMany(t.db, [
      ...Array.from({ length: 600 }, (_, i) =>
        sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: keys[i % 4] as string }),
      ),
      ...Array.from({ length: 200 }, (_, i) => syncProfile.with({ userId: i, name: 'n' }, { queue: 'profiles' })),
    ]);
    const declared: DeclaredLimit[] = [
      { scope: 'queue', name: 'tenants', maxRunning: 6 },
      { scope: 'key', name: 'tenants', maxRunning: 2 },
      { scope: 'kind', name: 'sync-profile', maxRunning: 3 },
    ];
    const claimers = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    // What this process holds at each moment is a subset of what runs in the database (a job
    // runs from its claim's commit, before the claim returns, to its end's commit, after the next
    // claim is sent): whenever the held set breaks a limit, the database's did too.
    const held = new Map<string, { queue: string; kind: string; key: string | null }>();
    const keyOf = new Map<string, string | null>();
    const { rows } = await t.admin.query(`select id::text as id, concurrency_key as k from "${t.schema}".jobs`);
    for (const r of rows) keyOf.set(r.id, r.k);
    const violations: string[] = [];
    let peakTenants = 0;
    const check = () => {
      const values = [...held.values()];
      const tenants = values.filter((v) => v.queue === 'tenants').length;
      peakTenants = Math.max(peakTenants, tenants);
      if (tenants > 6) violations.push(`tenants ${tenants}`);
      const profiles = values.filter((v) => v.kind === 'sync-profile').length;
      if (profiles > 3) violations.push(`sync-profile ${profiles}`);
      for (const k of keys) {
        const n = values.filter((v) => v.key === k).length;
        if (n > 2) violations.push(`key ${k} ${n}`);
      }
    };
    try {
      await Promise.all(
        claimers.map(async (conn, c) => {
          // Each claimer holds its last two batches (it ends the older one in the statement that
          // claims the next), so together they press against every limit, whatever the timing.
          let older: { id: string; leaseToken: string }[] = [];
          let mine: { id: string; leaseToken: string }[] = [];
          let empty = 0;
          while (empty < 3) {
            for (const j of older) held.delete(j.id);
            const { jobs } = await claimJobs(conn.executor, t.schema, {
              leases: LEASES,
              limit: 4,
              invocationId: `c${c}`,
              limits: declared,
              settle: done(older),
            });
            for (const j of jobs) held.set(j.id, { queue: j.queue, kind: j.kind, key: keyOf.get(j.id) ?? null });
            check();
            older = mine;
            mine = jobs;
            empty = jobs.length === 0 && older.length === 0 ? empty + 1 : 0;
            // Hold the jobs for a turn of the event loop, as a handler would.
            await new Promise((resolve) => setImmediate(resolve));
          }
          for (const j of [...older, ...mine]) held.delete(j.id);
          await claimJobs(conn.executor, t.schema, {
            leases: LEASES,
            limit: 0,
            invocationId: `c${c}`,
            settle: done([...older, ...mine]),
          });
        }),
      );
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
    expect(violations).toEqual([]);
    // The limits were reached (the test would see a breach), and every job ran exactly once.
    expect(peakTenants).toBe(6);
    const states = await t.admin.query(
      `select state, count(*)::int as n, max(attempt)::int as attempts from "${t.schema}".jobs group by state`,
    );
    expect(states.rows).toEqual([{ state: 'completed', n: 800, attempts: 1 }]);
  });

  it('8 claimers under a per-key limit alone (the walk locks keys), some dying mid-batch: never more than the limit per key, rescues included', async () => {
    const keys = Array.from({ length: 12 }, (_, i) => `t${i}`);
    await q.enqueueMany(
      t.db,
      Array.from({ length: 480 }, (_, i) =>
        sendEmail.with(email(i), { queue: 'tenants', concurrencyKey: keys[i % keys.length] as string }),
      ),
    );
    const declared: DeclaredLimit[] = [{ scope: 'key', name: 'tenants', maxRunning: 2 }];
    const leases = [{ kind: 'send-email', leaseMs: 60_000 }];
    const claimers = Array.from({ length: 8 }, () => openDb({ max: 1 }));
    const keyOf = new Map<string, string>();
    const { rows } = await t.admin.query(`select id::text as id, concurrency_key as k from "${t.schema}".jobs`);
    for (const r of rows) keyOf.set(r.id, r.k);
    // What runs, as far as this process knows (a subset of what the database runs, as above). A batch
    // a claimer abandons stays in it: its jobs run until their lease runs out and another claim
    // rescues them (then they are that claimer's).
    const held = new Map<string, string>();
    const violations: string[] = [];
    let peak = 0;
    const check = () => {
      for (const k of keys) {
        let n = 0;
        for (const v of held.values()) if (v === k) n++;
        peak = Math.max(peak, n);
        if (n > 2) violations.push(`key ${k} ${n}`);
      }
    };
    // The statements' clock: one second more at each claim, so abandoned leases (60 s) run out after
    // ~60 claims, while a live batch, settled at its claimer's next turn but one, sees ~16 of the
    // others' claims. (With 20 s a slow claimer's live batch could lapse twice; sendEmail allows 3
    // attempts, and a lapsed lease at its last attempt is the sweep's to bury, which this test does
    // not run: the job then held its key's place to the end, a failure seen 2 times in ~50 runs.)
    const t0 = Date.now();
    let ticks = 0;
    const now = () => new Date(t0 + ++ticks * 1_000);
    const abandoned = new Set<string>();
    const left = async () =>
      (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where state in ('queued', 'running')`))
        .rows[0].n as number;
    try {
      await Promise.all(
        claimers.map(async (conn, c) => {
          let older: { id: string; leaseToken: string }[] = [];
          let mine: { id: string; leaseToken: string }[] = [];
          let died = false;
          for (let turn = 0; turn < 400; turn++) {
            // Claimers 0 to 3 die once, at their first turn from the 3rd on that holds a batch (a claim
            // can come back empty while the keys are at their limit): that batch is never settled.
            const dies: boolean = c < 4 && !died && turn >= 3 && older.length > 0;
            died ||= dies;
            // A job can be abandoned twice: rescued by a claimer that dies holding it in turn.
            if (dies) for (const j of older) abandoned.add(j.id);
            else for (const j of older) held.delete(j.id);
            const { jobs } = await claimJobs(conn.executor, t.schema, {
              leases,
              limit: 5,
              invocationId: `c${c}`,
              limits: declared,
              now: now(),
              settle: dies ? [] : done(older),
            });
            for (const j of jobs) held.set(j.id, keyOf.get(j.id) as string);
            check();
            older = mine;
            mine = jobs;
            if (jobs.length === 0 && older.length === 0 && (await left()) === 0) break;
            await new Promise((resolve) => setImmediate(resolve));
          }
          for (const j of [...older, ...mine]) held.delete(j.id);
          await claimJobs(conn.executor, t.schema, {
            leases,
            limit: 0,
            invocationId: `c${c}`,
            now: now(),
            settle: done([...older, ...mine]),
          });
        }),
      );
    } finally {
      await Promise.all(claimers.map((c) => c.close()));
    }
    expect(violations).toEqual([]);
    expect(peak).toBe(2);
    expect(abandoned.size).toBeGreaterThan(0);
    const states = await t.admin.query(
      `select state, count(*)::int as n, count(*) filter (where attempt > 1)::int as rescued
       from "${t.schema}".jobs group by state`,
    );
    // Every job ran to its end, and the abandoned ones were rescued (a second attempt).
    expect(states.rows).toHaveLength(1);
    expect(states.rows[0]).toMatchObject({ state: 'completed', n: 480 });
    expect(states.rows[0].rescued).toBeGreaterThanOrEqual(abandoned.size);
  });
});
