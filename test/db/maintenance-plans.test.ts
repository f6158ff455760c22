import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import type { Executor } from '../../db/executor.js';
import { expireDeadlines, pruneFinished } from '../../db/statements/maintenance.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';

let t: TestContext;
useTestSchema('maintenance-plans', (ctx) => {
  t = ctx;
});

const ROWS = 20_000;

type PlanNode = {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
};

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the one statement `run` sends, with the clock it uses in
 * production (no test `now`), inside a transaction that is rolled back.
 */
async function explain(run: (db: Executor) => Promise<unknown>): Promise<PlanNode> {
  let captured: SQL | undefined;
  const record = async (query: SQL) => {
    captured = query;
    return [];
  };
  await run({ query: record, hot: record, batch: async () => [], transaction: undefined });
  const { sql: text, params } = new PgDialect().sqlToQuery(captured as SQL);
  const client = await t.admin.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query(`explain (analyze, buffers, format json) ${text}`, params);
    return (rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]?.Plan as PlanNode;
  } finally {
    await client.query('rollback');
    client.release();
  }
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

const buffers = (plan: PlanNode) => plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];

describe(`maintenance statements read only what they change (${testDriver()})`, () => {
  it('expireDeadlines finds nothing due among many future deadlines through jobs_deadline_idx', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(
      `insert into ${s}.jobs (kind, payload, deadline) select 'k', '{}', now() + interval '1 day' from generate_series(1, ${ROWS})`,
    );
    await t.admin.query(`analyze ${s}.jobs`);
    const plan = await explain((db) => expireDeadlines(db, t.schema));
    const scan = nodes(plan).find((n) => n['Index Name'] === 'jobs_deadline_idx');
    expect(scan?.['Index Cond']).toMatch(/deadline <=/);
    expect(buffers(plan)).toBeLessThan(50);
  });

  it('pruneFinished finds nothing old among many young completed jobs through jobs_finished_idx', async () => {
    const s = `"${t.schema}"`;
    await t.admin.query(
      `insert into ${s}.jobs (kind, payload, state, finished_at) select 'k', '{}', 'completed', now() from generate_series(1, ${ROWS})`,
    );
    await t.admin.query(`analyze ${s}.jobs`);
    const plan = await explain((db) => pruneFinished(db, t.schema, 'completed', 7 * 24 * 3_600_000, 1000));
    const scan = nodes(plan).find((n) => n['Index Name'] === 'jobs_finished_idx');
    expect(scan?.['Index Cond']).toMatch(/finished_at </);
    expect(buffers(plan)).toBeLessThan(50);
  });
});
