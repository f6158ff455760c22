import { randomUUID } from 'node:crypto';
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import * as z from 'zod';
import type { Outcome } from '../../base/outcomes.js';
import { pause } from '../../core/controls.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { connect } from '../../db/connect.js';
import { HOT_PLANS } from '../../db/drivers/pg-hot.js';
import type { Executor } from '../../db/executor.js';
import { migrate } from '../../db/migrate.js';
import { renderSql } from '../../db/render.js';
import { claimJobs, claimStatement as claimSql } from '../../db/statements/claim.js';

// The plan of the claim on a backlog in one queue: the planner must keep the ordered index scan
// under LIMIT. A filter it misjudges (the pause check once estimated to keep no row, from the
// queue column's statistics) makes it sort the whole backlog instead: 50x slower, no test failing.
const schema = `t_claim_plan_${(process.env.SKIPLOCK_TEST_RUN ?? '').replace(/[^a-z0-9_]/g, '_')}`;
const grown = `${schema}_grown`;
const db = connect({ connectionString: inject('databaseUrl'), max: 1 });
const admin = new pg.Client({ connectionString: inject('databaseUrl') });

afterAll(async () => {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.query(`drop schema if exists "${grown}" cascade`);
  await admin.end();
  await db.close();
});

const noop = defineJob({ kind: 'noop', payload: z.object({ n: z.number() }), handler: () => {} });

/** The claim statement claimJobs sends, as text and parameters (with `settle`: the steady state's). */
async function claimStatement(
  lane?: number,
  settle?: Outcome[],
  limit = 100,
  inSchema = schema,
): Promise<{ text: string; values: unknown[] }> {
  let captured: { text: string; values: unknown[] } | undefined;
  const capture = (statement: SQL) => {
    const { sql: text, params } = renderSql(statement);
    if (text.includes('ready as')) captured = { text, values: params };
  };
  // The connection's Executor, wrapped: what it is asked to send, as the driver renders it.
  const recording: Executor = {
    ...db.executor,
    query: (statement) => {
      capture(statement);
      return db.executor.query(statement);
    },
    hot: (statement, hint) => {
      capture(statement);
      return db.executor.hot(statement, hint);
    },
  };
  try {
    await admin.query('begin');
    await claimJobs(recording, inSchema, {
      leases: [{ kind: 'noop', leaseMs: 60_000 }],
      limit,
      invocationId: 'p',
      lane,
      ...(settle ? { settle } : {}),
    });
  } finally {
    await admin.query('rollback');
  }
  return captured as { text: string; values: unknown[] };
}

async function planOf(statement: { text: string; values: unknown[] }): Promise<string> {
  await admin.query('begin');
  try {
    const { rows } = await admin.query(`explain (costs off) ${statement.text}`, statement.values);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await admin.query('rollback');
  }
}

/** A parameter as an SQL literal, for EXECUTE: what node-postgres would send for it. */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) {
    const items = value.map((v) => (v === null ? 'NULL' : `"${String(v).replace(/[\\"]/g, '\\$&')}"`));
    return pg.escapeLiteral(`{${items.join(',')}}`);
  }
  return pg.escapeLiteral(typeof value === 'object' ? JSON.stringify(value) : String(value));
}

/**
 * The plan the pool runs `statement` with: prepared as `name` on the admin session under the pool's
 * settings (HOT_PLANS), the first call makes its one generic plan and later calls show that plan.
 */
async function genericPlanOf(name: string, statement: { text: string; values: unknown[] }): Promise<string> {
  const known = await admin.query('select 1 from pg_prepared_statements where name = $1', [name]);
  if (known.rows.length === 0) await admin.query(`prepare ${name} as ${statement.text}`);
  await admin.query(HOT_PLANS);
  try {
    const { rows } = await admin.query(
      `explain (costs off) execute ${name}(${statement.values.map(literal).join(', ')})`,
    );
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await admin.query('rollback');
  }
}

/** The lines of one CTE of a plan (up to the next CTE at the same depth). */
function cte(plan: string, name: string): string {
  const lines = plan.split('\n');
  const start = lines.findIndex((l) => l.trim() === `CTE ${name}`);
  expect(start).toBeGreaterThanOrEqual(0);
  const indent = (lines[start] as string).search(/\S/);
  const end = lines.findIndex((l, i) => i > start && l.search(/\S/) <= indent);
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

describe('the claim plan on a backlog of one queue (pg)', () => {
  it('walks jobs_claim_idx in order under LIMIT (no sort, no bitmap scan), paused or not, with ordering keys or not; a lane claim uses its index', async () => {
    await admin.connect();
    await admin.query(`drop schema if exists "${schema}" cascade`);
    await migrate(db, { schema });
    const enqueuer = createEnqueuer({ schema });
    for (let i = 0; i < 5; i++) {
      await enqueuer.enqueueMany(
        db,
        Array.from({ length: 1_000 }, (_, n) => noop.with({ n })),
      );
    }
    await admin.query(`analyze "${schema}".jobs`);
    const check = async () => {
      const head = cte(await planOf(await claimStatement()), 'ready');
      expect(head).toMatch(/Index Scan using jobs_claim_idx on jobs j/);
      expect(head).not.toMatch(/Sort|Bitmap Heap Scan on jobs j\b/);
      // A lane holds a sixteenth of the backlog: the planner may sort that little; it must use its index.
      expect(cte(await planOf(await claimStatement(3)), 'in_lane')).toMatch(
        /Index Scan on jobs_claim_lane_idx|Index Scan using jobs_claim_lane_idx/,
      );
    };
    await check();
    await pause(db, { queue: 'other' }, { schema, by: 'test' });
    await check();
    // A backlog where most jobs have ordering keys (and most of those are parked followers).
    for (let i = 0; i < 5; i++) {
      await enqueuer.enqueueMany(
        db,
        Array.from({ length: 1_000 }, (_, n) => noop.with({ n }, { orderingKey: `key-${n % 200}` })),
      );
    }
    await admin.query(`analyze "${schema}".jobs`);
    await check();
  });

  it('updates the claimed and the settled rows by primary key, never by a scan of the whole table', async () => {
    // Joined to the picked ids, the planner hashed every row of jobs on each claim and each settle
    // (8.5 of 16.5 ms per 500-job claim on 20,000 rows): a cost that grew with the table.
    const claimed = await claimJobs(db.executor, schema, {
      leases: [{ kind: 'noop', leaseMs: 60_000 }],
      limit: 100,
      invocationId: 'p',
    });
    expect(claimed.jobs).toHaveLength(100);
    await admin.query(`analyze "${schema}".jobs`);
    const done = (outcome: 'completed' | 'retry'): Outcome[] =>
      claimed.jobs.map((j) =>
        outcome === 'completed'
          ? { id: j.id, leaseToken: j.leaseToken, outcome }
          : { id: j.id, leaseToken: j.leaseToken, outcome, delayMs: 1000, error: { class: 'Error', message: 'again' } },
      );
    for (const settle of [undefined, done('completed'), done('retry')]) {
      const plan = await planOf(await claimStatement(undefined, settle, 500));
      expect(plan).toMatch(/Index Scan using jobs_pkey on jobs j/);
      expect(plan).not.toMatch(/Seq Scan on jobs/);
    }
  });

  it('delete mode: the completions the delete took are not looked up again by the update of those it left', async () => {
    // `kept` writes the completions the delete left (a dedupe window, dependents). Given every id of
    // the batch, it probed the primary key for each row the delete had just removed: 45 % of a
    // delete-mode settle of 500 in the bench (bench/history.md item 36).
    const leases = [{ kind: 'noop', leaseMs: 60_000 }];
    const claimed = await claimJobs(db.executor, schema, { leases, limit: 50, invocationId: 'p' });
    expect(claimed.jobs).toHaveLength(50);
    const settle: Outcome[] = claimed.jobs.map((j) => ({ id: j.id, leaseToken: j.leaseToken, outcome: 'completed' }));
    const request = { leases, limit: 10, invocationId: 'p', settle, completion: 'delete' as const };
    const statement = new PgDialect().sqlToQuery(claimSql(schema, request, 'plain', randomUUID()));
    type Node = {
      'Subplan Name'?: string;
      'Actual Rows': number;
      'Shared Hit Blocks': number;
      'Shared Read Blocks': number;
      Plans?: Node[];
    };
    const find = (node: Node, name: string): Node | undefined =>
      node['Subplan Name'] === name ? node : (node.Plans ?? []).map((n) => find(n, name)).find(Boolean);
    await admin.query('begin');
    try {
      const { rows } = await admin.query(`explain (analyze, buffers, format json) ${statement.sql}`, statement.params);
      const plan = (rows[0]['QUERY PLAN'] as { Plan: Node }[])[0]?.Plan as Node;
      const deleted = find(plan, 'CTE deleted') as Node;
      const kept = find(plan, 'CTE kept') as Node;
      expect(deleted['Actual Rows']).toBe(50);
      expect(kept['Actual Rows']).toBe(0);
      expect(kept['Shared Hit Blocks'] + kept['Shared Read Blocks']).toBe(0);
    } finally {
      await admin.query('rollback');
    }
  });

  it('the one plan the pool keeps, made on an empty table, still reads the indexes once the table has grown', async () => {
    // The pool plans each hot statement once per connection (db/drivers/pg-pool.ts). Made while the
    // table was empty and kept until the next ANALYZE, a plan that chose sequential scans read the
    // whole table on every claim as it grew (the bench's soak: claim p50 1.7 → 4.8 ms in 90 s).
    await admin.query(`drop schema if exists "${grown}" cascade`);
    await migrate(db, { schema: grown });
    const outcome: Outcome = { id: '1', leaseToken: '00000000-0000-4000-8000-000000000000', outcome: 'completed' };
    const plain = await claimStatement(undefined, undefined, 100, grown);
    const steady = await claimStatement(undefined, [outcome], 100, grown);
    await genericPlanOf('hot_plain', plain);
    await genericPlanOf('hot_steady', steady);
    // 5,000 queued and 100 running rows, and no ANALYZE: the plans made on the empty table stay.
    const enqueuer = createEnqueuer({ schema: grown });
    for (let i = 0; i < 5; i++) {
      await enqueuer.enqueueMany(
        db,
        Array.from({ length: 1_000 }, (_, n) => noop.with({ n })),
      );
    }
    await claimJobs(db.executor, grown, { leases: [{ kind: 'noop', leaseMs: 60_000 }], limit: 100, invocationId: 'p' });
    try {
      for (const name of ['hot_plain', 'hot_steady']) {
        const plan = await genericPlanOf(name, name === 'hot_plain' ? plain : steady);
        expect(plan).not.toMatch(/Seq Scan on jobs/);
        expect(cte(plan, 'ready')).toMatch(/Index Scan using jobs_claim_idx on jobs j/);
      }
    } finally {
      await admin.query('deallocate all');
    }
  });
});
