// The Worker: every skiplock route on fetch (/skiplock/enqueue, /skiplock/worker, /skiplock/replay,
// /skiplock/control, /skiplock/signal, /skiplock/maintenance, the console at /admin), the worker on
// each Cron Trigger and maintenance on the 5-minute one (wrangler.jsonc).
import { createCloudflareWorker } from 'skiplock/cloudflare';
import { jobs, schedules } from '../functions/jobs.js';

export default createCloudflareWorker(jobs, { schedules, maintenanceCron: '*/5 * * * *', cpuMs: 30_000 });
