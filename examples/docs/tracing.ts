// Traces from enqueue to execution with OpenTelemetry (docs/operations.md#traces).
import { connect, createEnqueuer, createWorker, defineJob } from 'skiplock';
import { createLambdaWorker } from 'skiplock/lambda';
import { otelTracing } from 'skiplock/otel';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
const sendEmail = defineJob({ kind: 'send-email', payload: z.object({ to: z.email() }), handler: async () => {} });

// #region tracing
// Your OpenTelemetry SDK (NodeSDK, the Lambda layer, @vercel/otel) registers the provider;
// otelTracing() uses it (or pass { tracer }).
const tracing = otelTracing();
// A `send <queue>` span around each enqueue; its context is stored with the jobs.
const enqueuer = createEnqueuer({ tracing });
await enqueuer.enqueue(db, sendEmail, { to: 'ada@example.com' });
// `receive <queue>` per claim, `process <queue>` per attempt, linked to the job's `send` span.
export const worker = createWorker({ db, jobs: [sendEmail], tracing });
export const handler = createLambdaWorker([sendEmail], { tracing });
// #endregion tracing
