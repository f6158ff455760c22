// Metrics with OpenTelemetry (docs/operations.md#metrics-with-opentelemetry).
import { defineJob } from 'skiplock';
import { otelMetrics } from 'skiplock/otel';
import { createVercelMaintenance, createVercelWorker } from 'skiplock/vercel';
import { z } from 'zod';

const sendEmail = defineJob({ kind: 'send-email', payload: z.object({ to: z.email() }), handler: async () => {} });

// #region metrics
// Your OpenTelemetry SDK registers a meter provider with a reader that exports over OTLP (NodeSDK,
// @vercel/otel with a metric reader); otelMetrics() uses it (or pass { meter }).
const metrics = otelMetrics();
// Attempts started and ended by queue, kind and outcome, their durations, rate waits, breakers, invocations.
export const GET = createVercelWorker([sendEmail], { metrics });
// Queue depth (ready, running, dead, sleeping, oldest ready age) as each maintenance tick reads it.
export const maintenance = createVercelMaintenance({ metrics });
// #endregion metrics
