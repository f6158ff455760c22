// A Cloudflare Worker serving skiplock (docs/deploy-cloudflare.md).
// #region cloudflare-worker
import { createCloudflareWorker } from 'skiplock/cloudflare';
import { deliverWebhook, sendEmail } from './jobs.js';

// fetch: every route (/skiplock/enqueue, /skiplock/worker, /skiplock/replay, …, the console at
// /admin); scheduled: the worker on each Cron Trigger, maintenance on its own.
export default createCloudflareWorker([deliverWebhook, sendEmail], {
  maintenanceCron: '*/5 * * * *',
  cpuMs: 30_000, // = limits.cpu_ms in wrangler.jsonc (30 s is Cloudflare's default)
});
// #endregion cloudflare-worker
