import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgSchema, text } from 'drizzle-orm/pg-core';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaEnqueue, createLambdaWorker } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelWorker } from '../../adapters/vercel.js';
import { defineJob } from '../../core/jobs.js';
import type { DrizzleFactory } from '../../db/connect.js';
import { lambdaContext, scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';

// The deployed functions' pg pool runs skiplock's statements without a Drizzle database (its query
// builders stay out of the bundle). A handler's transaction — a transactional kind's ctx.tx, a
// transactional step's tx — then comes from the worker's `drizzle` option; without it, the kind is
// refused when the worker starts and the step when it runs, each naming the option.
let t: TestContext;
useTestSchema('functions-lambda-drizzle', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = () => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: 'pg',
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
});
const invoices = () => pgSchema(t.schema).table('invoices', { orderId: text('order_id').primaryKey() });
const written = async () =>
  (await t.admin.query(`select order_id from "${t.schema}".invoices order by 1`)).rows.map((r) => r.order_id);
const jobState = async (kind: string) =>
  (await t.admin.query(`select state, dead_reason, last_error from "${t.schema}".jobs where kind = $1`, [kind])).rows;

beforeEach(async () => {
  await t.admin.query(`create table if not exists "${t.schema}".invoices (order_id text primary key)`);
  await t.admin.query(`truncate "${t.schema}".invoices, "${t.schema}".jobs`);
});

const issueInvoice = defineJob({
  kind: 'issue-invoice',
  payload: z.object({ orderId: z.string() }),
  transactional: true,
  maxAttempts: 1,
  timeoutMs: 1_000,
  handler: async ({ orderId }, ctx) => {
    await ctx.tx.insert(invoices()).values({ orderId });
    if (orderId === 'bad') throw new Error('after the write');
  },
});

describe('Lambda worker on pg: handlers’ Drizzle transactions come from the `drizzle` option', () => {
  it('refuses a transactional kind without `drizzle`, naming it; nothing runs', async () => {
    await createLambdaEnqueue([issueInvoice], { env: env() })({ kind: 'issue-invoice', payload: { orderId: 'a' } });
    const summary = await createLambdaWorker([issueInvoice], { env: env() })(scheduledEvent(), lambdaContext(10_000));
    expect(summary).toMatchObject({
      ok: false,
      error: expect.stringMatching(/issue-invoice is transactional: .*`drizzle`/),
    });
    expect(await jobState('issue-invoice')).toEqual([{ state: 'queued', dead_reason: null, last_error: null }]);
  });

  it("with `drizzle`, ctx.tx is a Drizzle transaction: the handler's write commits with the completion, and rolls back with a failure", async () => {
    await createLambdaEnqueue([issueInvoice], { env: env() })({
      jobs: ['good', 'bad'].map((orderId) => ({ kind: 'issue-invoice', payload: { orderId } })),
    });
    const summary = await createLambdaWorker([issueInvoice], { env: env(), drizzle })(
      scheduledEvent(),
      lambdaContext(10_000),
    );
    expect(summary).toMatchObject({ claimed: 2, completed: 1, dead: 1 });
    expect(await written()).toEqual(['good']);
    const states = (await jobState('issue-invoice')).map((r) => r.state).sort();
    expect(states).toEqual(['completed', 'dead']);
  });

  it('a transactional step: refused as step_unsupported without `drizzle`, naming it; with it, its write commits', async () => {
    const receipt = defineJob({
      kind: 'receipt',
      payload: z.object({ orderId: z.string() }),
      maxAttempts: 1,
      timeoutMs: 1_000,
      handler: async ({ orderId }, ctx) =>
        ctx.step('write', { transaction: true }, async (tx) => {
          await tx.execute(sql`insert into ${sql.identifier(t.schema)}.invoices values (${orderId})`);
          return 'written';
        }),
    });
    const enqueue = createLambdaEnqueue([receipt], { env: env() });
    await enqueue({ kind: 'receipt', payload: { orderId: 'first' } });
    await createLambdaWorker([receipt], { env: env() })(scheduledEvent(), lambdaContext(10_000));
    const [refused] = await jobState('receipt');
    expect(refused).toMatchObject({ state: 'dead', dead_reason: 'step_unsupported' });
    expect(refused.last_error.message).toMatch(/transactional step needs Drizzle: .*`drizzle`/);
    expect(await written()).toEqual([]);

    await t.admin.query(`truncate "${t.schema}".jobs`);
    await enqueue({ kind: 'receipt', payload: { orderId: 'second' } });
    const summary = await createLambdaWorker([receipt], { env: env(), drizzle })(
      scheduledEvent(),
      lambdaContext(10_000),
    );
    expect(summary).toMatchObject({ completed: 1 });
    expect(await written()).toEqual(['second']);
  });

  it('the Vercel worker route takes `drizzle` the same way', async () => {
    await createLambdaEnqueue([issueInvoice], { env: env() })({ kind: 'issue-invoice', payload: { orderId: 'v' } });
    const secret = 'cron-secret-0123456789abcdef';
    const route = (options: { drizzle?: DrizzleFactory }) =>
      createVercelWorker([issueInvoice], { env: { ...env(), CRON_SECRET: secret }, maxDurationMs: 10_000, ...options })(
        new Request('https://app.example.com/api/worker', { headers: { authorization: `Bearer ${secret}` } }),
      );
    const refused = await route({});
    expect(JSON.stringify(await refused.json())).toMatch(/issue-invoice is transactional: .*`drizzle`/);
    // The form that gives ctx.tx an app's schema: a function of the connection.
    const ran = await route({ drizzle: ({ client }) => drizzle({ client, schema: { invoices: invoices() } }) });
    expect(await ran.json()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await written()).toEqual(['v']);
  });
});
