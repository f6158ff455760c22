// Vercel cron (every 10 minutes): deadlines to the DLQ, retention pruning, stats.
import { createVercelMaintenance } from 'skiplock/vercel';

export const maxDuration = 120;
export const GET = createVercelMaintenance({ maxDurationMs: maxDuration * 1000 });
