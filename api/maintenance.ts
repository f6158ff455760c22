// Vercel cron (every 10 minutes): deadlines to the DLQ, retention pruning, stats.
import { createVercelMaintenance } from 'skiplock/vercel';

export const GET = createVercelMaintenance({ maxDurationMs: 120_000 });
