// Vercel cron (every 10 minutes): deadlines to the DLQ, retention pruning, stats.
import { createVercelMaintenance } from '../functions/vercel.js';

export const GET = createVercelMaintenance({ maxDurationMs: 120_000 });
