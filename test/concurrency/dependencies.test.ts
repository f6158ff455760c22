// Parents ended by many connections at once: a simulation of concurrent invocations, which
// depends on Postgres's locking, not on the driver that carries the statements. It runs once (pg);
// the statements themselves run on every driver in test/db/dependencies.test.ts.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Outcome } from '../../base/outcomes.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { type ClaimRequest, claimJobs } from '../../db/statements/claim.js';
import { settleJobs } from '../../db/statements/settle.js';
import { openDb, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('dependencies_concurrency', (ctx) => {
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

describe(`dependencies under concurrency (${testDriver()})`, () => {
  it('two parents of each child completed at the same moment by two connections: every child is released once, no deadlock', async () => {
    const PAIRS = 60;
    const flows = await enqueuer().enqueueMany(
      t.db,
      Array.from({ length: PAIRS * 2 }, (_, n) => parentKind.with({ n })),
    );
    const ids = flows.map((f) => f.id);
    await enqueuer().enqueueMany(
      t.db,
      Array.from({ length: PAIRS }, (_, n) =>
        childKind.with({ n }, { after: [ids[2 * n] as string, ids[2 * n + 1] as string] }),
      ),
    );
    const { jobs } = await claim({ leases: [LEASES[0] as (typeof LEASES)[0]] });
    expect(jobs).toHaveLength(PAIRS * 2);
    expect((await claim()).jobs).toEqual([]); // children wait
    // One connection ends the first parent of every pair, the other the second, in opposite orders,
    // in batches of three, all at once: each child's two parents end in two transactions side by side.
    const byN = new Map(jobs.map((j) => [(j.payload as { n: number }).n, j]));
    const firsts = Array.from({ length: PAIRS }, (_, n) => byN.get(2 * n)).filter((j) => j !== undefined);
    const seconds = Array.from({ length: PAIRS }, (_, n) => byN.get(2 * n + 1))
      .filter((j) => j !== undefined)
      .reverse();
    const connections = [openDb({ max: 1 }), openDb({ max: 1 })] as const;
    try {
      const settleAll = async (db: (typeof connections)[0], list: typeof jobs) => {
        for (let i = 0; i < list.length; i += 3) {
          await settleJobs(db.executor, t.schema, completed(list.slice(i, i + 3)));
        }
      };
      await Promise.all([settleAll(connections[0], firsts), settleAll(connections[1], seconds)]);
    } finally {
      await Promise.all(connections.map((c) => c.close()));
    }
    const children = await rows('child');
    expect(children.filter((c) => c.parked)).toEqual([]);
    const next = await claim();
    expect(next.jobs).toHaveLength(PAIRS);
  });

  // Three rounds: a race between two parents' enders left a child waiting about once in 100 rounds
  // under load (fixed in migration 0021; 1,800 rounds of this scenario ran clean after it).
  it('parents ended by many concurrent claim-and-settle loops: each child runs after both its parents, none is stranded', async () => {
    for (let round = 0; round < 3; round++) {
      await t.admin.query(`truncate "${t.schema}".jobs`);
      await endParentsConcurrently();
    }
  });

  async function endParentsConcurrently() {
    const PAIRS = 40;
    const parents = await enqueuer().enqueueMany(
      t.db,
      Array.from({ length: PAIRS * 2 }, (_, n) => parentKind.with({ n })),
    );
    const ids = parents.map((f) => f.id);
    await enqueuer().enqueueMany(
      t.db,
      Array.from({ length: PAIRS }, (_, n) =>
        childKind.with({ n }, { after: [ids[n] as string, ids[PAIRS * 2 - 1 - n] as string] }),
      ),
    );
    const ended = new Map<string, number>();
    const started: { id: string; at: number }[] = [];
    let tick = 0;
    const connections = Array.from({ length: 4 }, () => openDb({ max: 1 }));
    try {
      await Promise.all(
        connections.map(async (db, w) => {
          let held: { id: string; leaseToken: string; kind: string }[] = [];
          for (let round = 0; round < 200; round++) {
            const result = await claimJobs(db.executor, t.schema, {
              leases: LEASES,
              limit: 3,
              invocationId: `w${w}`,
              settle: completed(held),
            });
            for (const j of held) ended.set(j.id, tick++);
            for (const j of result.jobs) if (j.kind === 'child') started.push({ id: j.id, at: tick++ });
            held = result.jobs;
            if (held.length === 0 && !result.endedParents && (await rows('child')).every((c) => c.state !== 'queued'))
              break;
          }
          await settleJobs(db.executor, t.schema, completed(held));
        }),
      );
    } finally {
      await Promise.all(connections.map((c) => c.close()));
    }
    expect((await rows('child')).map((c) => c.state)).toEqual(Array(PAIRS).fill('completed'));
    const { rows: children } = await t.admin.query(
      `select id::text, after::text[] as after from "${t.schema}".jobs where kind = 'child'`,
    );
    for (const child of children as { id: string; after: string[] }[]) {
      const start = started.find((s) => s.id === child.id)?.at as number;
      for (const parent of child.after) expect(ended.get(parent)).toBeLessThan(start);
    }
  }
});
