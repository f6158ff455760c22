import { MetricReader } from '@opentelemetry/sdk-metrics';
import { expect } from 'vitest';
import { createVercelMaintenance } from '../../adapters/vercel.js';
import type { QueueMetrics } from '../../core/metrics.js';
import { databaseUrl } from './db.js';

/** A reader the test pulls from (the SDK's MetricReader; collect() is what an exporter would send). */
export class PullReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** One maintenance tick of `schema` (the Vercel route, pg) reporting its queue depth to `metrics`. */
export async function maintenanceTick(metrics: QueueMetrics, schema: string): Promise<void> {
  const maintenance = createVercelMaintenance({
    env: {
      DATABASE_URL: databaseUrl(),
      SKIPLOCK_SCHEMA: schema,
      CRON_SECRET: 'cron-secret-0123456789',
      SKIPLOCK_LOG_LEVEL: 'error',
    },
    metrics,
  });
  const response = await maintenance(
    new Request('https://app.example.com/api/maintenance', {
      headers: { authorization: 'Bearer cron-secret-0123456789' },
    }),
  );
  expect(response.status).toBe(200);
}
