// Fan-out on Lambda, with the real AWS SDK: a worker invocation that meets a backlog starts more
// invocations of its own function with asynchronous Invokes, which a local Invoke endpoint runs
// (as Lambda would), and the database's slots keep them within SKIPLOCK_MAX_INVOCATIONS.
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaWorker, type LambdaContext } from '../../adapters/lambda.js';
import { FAN_OUT_EVENT } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { defineJob } from '../../core/jobs.js';
import type { InvocationSummary } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { scheduledEvent } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { startLambdaEndpoint, useLocalAwsCredentials } from '../helpers/lambda-endpoint.js';

let t: TestContext;
useTestSchema('functions-fan-out', (ctx) => {
  t = ctx;
});

const FUNCTION = 'skiplock-test-worker';
useLocalAwsCredentials();
afterEach(() => resetSharedRuntime());

/**
 * Runs `ticks` worker invocations at once over 300 jobs of 100 ms; fan-out does the rest. With
 * `hold`, jobs wait until every tick has either been refused or claimed its first batch: the
 * admitted ticks are then all running at once, whatever the machine's speed.
 */
async function drain(ticks: number, hold = false) {
  // Every registration is counted as it is taken: the database's own record of the peak.
  await t.admin.query(`create table if not exists "${t.schema}".peak (n int not null)`);
  await t.admin.query(`truncate "${t.schema}".peak`);
  await t.admin.query(`
    create or replace function "${t.schema}".count_invocations() returns trigger language plpgsql as $$
    begin
      insert into "${t.schema}".peak
        select count(*) from "${t.schema}".invocations where expires_at > clock_timestamp();
      return null;
    end $$`);
  await t.admin.query(`drop trigger if exists count_invocations on "${t.schema}".invocations`);
  await t.admin.query(`create trigger count_invocations after insert or update on "${t.schema}".invocations
    for each row execute function "${t.schema}".count_invocations()`);

  // Each job takes 100 ms of the invocations' clock: one invocation finishes 10 a second.
  const clock = new ManualClock();
  // One lease token per claim: the tokens of the first batches tell the admitted invocations apart.
  const claims = new Set<string>();
  let saturated = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  // With `hold`: the registrations held once every tick was admitted or refused.
  let heldAtOnce: { n: number; invocations: number } | undefined;
  let deciding = false;
  const everyTickDecided = async () => {
    if (deciding || claims.size + saturated < ticks) return;
    deciding = true;
    const { rows } = await t.admin.query(
      `select count(*)::int as n, count(distinct invocation_id)::int as invocations from "${t.schema}".invocations`,
    );
    heldAtOnce = rows[0];
    release();
  };
  if (!hold) release();
  const slow = defineJob({
    kind: 'slow',
    payload: z.object({ n: z.number() }),
    timeoutMs: 60_000,
    handler: async (_payload, ctx) => {
      claims.add(ctx.leaseToken);
      void everyTickDecided();
      await released;
      clock.advance(100);
    },
  });
  await enqueuerFor(t.schema).enqueueMany(
    t.db,
    Array.from({ length: 300 }, (_, n) => slow.with({ n })),
  );
  const env = {
    DATABASE_URL: databaseUrl(),
    SKIPLOCK_DRIVER: testDriver(),
    SKIPLOCK_SCHEMA: t.schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_CONCURRENCY: '10',
    SKIPLOCK_MAX_INVOCATIONS: '4',
  };
  const worker = createLambdaWorker([slow], { env, clock });
  const context: LambdaContext = { getRemainingTimeInMillis: () => 600_000, functionName: FUNCTION };
  const summaries: InvocationSummary[] = [];
  const run = async (event: unknown) => {
    const summary = (await worker(event, context)) as InvocationSummary;
    summaries.push(summary);
    if (summary.stoppedBecause === 'saturated') saturated++;
    void everyTickDecided();
    return summary;
  };
  const lambda = await startLambdaEndpoint({ [FUNCTION]: run });
  process.env.AWS_ENDPOINT_URL_LAMBDA = lambda.url;
  try {
    await Promise.all(Array.from({ length: ticks }, () => run(scheduledEvent())));
    await lambda.settled(); // and every invocation they started
  } finally {
    await lambda.close();
  }
  const { rows: peak } = await t.admin.query(`select max(n)::int as max from "${t.schema}".peak`);
  const { rows: states } = await t.admin.query(
    `select state, count(*)::int as n from "${t.schema}".jobs group by state`,
  );
  const { rows: left } = await t.admin.query(`select count(*)::int as n from "${t.schema}".invocations`);
  return {
    invokes: lambda.invokes,
    // Counted by each registration's own transaction, which sees only committed others: a lower bound.
    peak: peak[0].max as number,
    heldAtOnce,
    states,
    summaries,
    slotsLeft: left[0].n as number,
  };
}

describe(`fan-out with asynchronous Lambda Invokes (${testDriver()})`, () => {
  it('one tick over a backlog starts more invocations of its function; never more than SKIPLOCK_MAX_INVOCATIONS run; every job completes', async () => {
    const result = await drain(1);
    expect(result.invokes.length).toBeGreaterThanOrEqual(3);
    for (const invoke of result.invokes) {
      expect(invoke).toEqual({ functionName: FUNCTION, invocationType: 'Event', payload: FAN_OUT_EVENT });
    }
    expect(result.peak).toBeGreaterThanOrEqual(2); // it did fan out
    expect(result.peak).toBeLessThanOrEqual(4);
    expect(result.states).toEqual([{ state: 'completed', n: 300 }]);
    expect(result.summaries.reduce((sum, s) => sum + s.completed, 0)).toBe(300);
    expect(result.slotsLeft).toBe(0); // every slot was given back
  });

  it('six ticks at the same instant: four are admitted, the rest return saturated at once', async () => {
    const result = await drain(6, true);
    // Four slots held by four invocations, all running at once; the two others were turned away.
    expect(result.heldAtOnce).toEqual({ n: 4, invocations: 4 });
    expect(result.summaries.filter((s) => s.stoppedBecause === 'saturated').length).toBeGreaterThanOrEqual(2);
    expect(result.peak).toBeLessThanOrEqual(4);
    for (const s of result.summaries) expect(['drained', 'saturated']).toContain(s.stoppedBecause);
    expect(result.states).toEqual([{ state: 'completed', n: 300 }]);
    expect(result.slotsLeft).toBe(0);
  });
});
