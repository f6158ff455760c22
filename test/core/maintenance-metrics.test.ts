import { describe, expect, it } from 'vitest';
import type { BreakerState } from '../../base/outcomes.js';
import type { QueueStatsRow } from '../../base/rows.js';
import { runMaintenance } from '../../core/maintenance.js';
import type { QueueMetrics } from '../../core/metrics.js';
import { type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';

// runMaintenance from code — a cron of your own, a long-running process — feeds the same QueueMetrics
// the deployed maintenance functions take (`createLambdaMaintenance({ metrics })`).
let t: TestContext;
useTestSchema('core-maintenance-metrics', (ctx) => {
  t = ctx;
});

describe('runMaintenance({ metrics })', () => {
  it('reports the queue depth it read, and the breakers when the metrics take them', async () => {
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      [1, 2, 3].map((n) => sendEmail.with({ to: `user${n}@example.com`, subject: 'hi' })),
    );
    await t.admin.query(
      `insert into "${t.schema}".destinations (name, state, open_until) values ('api.partner.example', 'open', now() + interval '1 minute')`,
    );
    const queues: QueueStatsRow[][] = [];
    const breakers: { name: string; state: BreakerState }[][] = [];
    const metrics: QueueMetrics = {
      queues: (rows) => void queues.push([...rows]),
      breakers: (rows) => void breakers.push([...rows]),
    };

    const report = await runMaintenance(t.db, { schema: t.schema, metrics });

    expect(queues).toEqual([report.stats]);
    expect(queues[0]?.find((r) => r.queue === 'emails')).toMatchObject({ kind: 'send-email', ready: 3 });
    expect(breakers).toEqual([[{ name: 'api.partner.example', state: 'open' }]]);
  });

  it('feeds metrics without a `breakers` hook the queue depth alone', async () => {
    const queues: QueueStatsRow[][] = [];
    await runMaintenance(t.db, { schema: t.schema, metrics: { queues: (rows) => void queues.push([...rows]) } });
    expect(queues).toHaveLength(1);
  });
});
