import { createHash } from 'node:crypto';
import { sql } from 'drizzle-orm';
import type { NeonHttpDatabase } from 'drizzle-orm/neon-http';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Outcome } from '../../base/outcomes.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('dependencies', (ctx) => {
  t = ctx;
});

const parentKind = defineJob({ kind: 'parent', payload: z.object({ n: z.number() }) });
const childKind = defineJob({ kind: 'child', payload: z.object({ n: z.number() }) });
const LEASES = [
  { kind: 'parent', leaseMs: 30_000 },
  { kind: 'child', leaseMs: 30_000 },
];
const enqueuer = () => createEnqueuer({ schema: t.schema });
const claim = (overrides: Partial<ClaimRequest> = {}) =>
  claimJobs(t.db.executor, t.schema, { leases: LEASES, limit: 500, invocationId: 'inv', ...overrides });
const completed = (jobs: readonly { id: string; leaseToken: string }[]): Outcome[] =>
  jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' as const }));
const rows = async (kind: string) =>
  (
    await t.admin.query(
      `select id::text, state, run_at = 'infinity' as parked from "${t.schema}".jobs where kind = $1 order by id`,
      [kind],
    )
  ).rows as { id: string; state: string; parked: boolean }[];

/** How many statements of this schema's that match `pattern` wait on a lock (other files share the server). */
const waitingOnLock = async (pattern: string) =>
  (
    await t.admin.query(
      `select count(*)::int as n from pg_stat_activity
       where wait_event_type = 'Lock' and query like $1 and strpos(query, $2) > 0`,
      [pattern, `"${t.schema}"`],
    )
  ).rows[0].n as number;

describe(`a child enqueued while its parent completes (${testDriver()})`, () => {
  if (testDriver() !== 'neon-http') {
    it('a child enqueued in an open transaction while its parent completes is released after both commit', async () => {
      const [parent] = await enqueuer().enqueueMany(t.db, [parentKind.with({ n: 1 })]);
      const { jobs } = await claim();
      expect(jobs.map((j) => j.id)).toEqual([parent?.id]);
      const other = openDb({ max: 1 });
      try {
        let childId = '';
        let settling: Promise<unknown> = Promise.resolve();
        await t.db.db.transaction(async (tx) => {
          const child = await enqueuer().enqueue(tx, childKind, { n: 1 }, { after: [parent?.id as string] });
          childId = child.id;
          // The completion waits for this transaction's lock on the parent row, then sees the child.
          settling = settleJobs(other.executor, t.schema, completed(jobs));
          while ((await waitingOnLock('%settle_input%')) === 0) await new Promise((resolve) => setImmediate(resolve));
        });
        const settled = (await settling) as { state: string }[];
        expect(settled.map((s) => s.state)).toEqual(['completed']);
        expect(await rows('child')).toEqual([{ id: childId, state: 'queued', parked: false }]);
        expect((await claim()).jobs.map((j) => j.id)).toEqual([childId]);
      } finally {
        await other.close();
      }
    });
  } else {
    // neon-http has no interactive transactions: the caller's transaction is a batch. The batch
    // enqueues the child, then waits on an advisory lock the test holds, so it is open (holding
    // its lock on the parent row) while the parent's completion is sent.
    it('a child enqueued in a neon-http batch while its parent completes is released after both commit', async () => {
      const [parent] = await enqueuer().enqueueMany(t.db, [parentKind.with({ n: 1 })]);
      const { jobs } = await claim();
      expect(jobs.map((j) => j.id)).toEqual([parent?.id]);
      const gate = await t.admin.connect();
      const other = openDb({ max: 1 });
      try {
        const key = Number.parseInt(createHash('sha1').update(t.schema).digest('hex').slice(0, 8), 16);
        await gate.query('select pg_advisory_lock($1)', [key]);
        const db = t.db.db as unknown as NeonHttpDatabase;
        const prepared = enqueuer().prepareEnqueue([childKind.with({ n: 1 }, { after: [parent?.id as string] })]);
        const batch = db.batch([
          ...prepared.statements.map((s) => db.execute(s)),
          db.execute(sql.raw(`select pg_advisory_xact_lock(${key})`)),
        ] as never) as Promise<unknown[]>;
        const waitingOnGate = async () =>
          (
            await t.admin.query(
              `select count(*)::int as n from pg_stat_activity where wait_event = 'advisory' and strpos(query, $1) > 0`,
              [String(key)],
            )
          ).rows[0].n as number;
        // pg_stat_activity shows a batch's last statement; the advisory lock call carries the key.
        while ((await waitingOnGate()) === 0) await new Promise((resolve) => setImmediate(resolve));
        const settling = settleJobs(other.executor, t.schema, completed(jobs));
        while ((await waitingOnLock('%settle_input%')) === 0) await new Promise((resolve) => setImmediate(resolve));
        await gate.query('select pg_advisory_unlock($1)', [key]);
        const [child] = prepared.read((await batch).slice(0, prepared.statements.length));
        const settled = (await settling) as { state: string }[];
        expect(settled.map((s) => s.state)).toEqual(['completed']);
        expect(child?.outcome).toBe('inserted');
        expect(await rows('child')).toEqual([{ id: child?.id, state: 'queued', parked: false }]);
        expect((await claim()).jobs.map((j) => j.id)).toEqual([child?.id]);
      } finally {
        gate.release();
        await other.close();
      }
    });
  }
});
