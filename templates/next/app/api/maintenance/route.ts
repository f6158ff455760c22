// Vercel cron (every 10 minutes on Pro, daily on Hobby; a quiet tick lets the next ones skip the
// database until something is written): deadlines to the DLQ, retention pruning, stats.
import { createVercelMaintenance } from 'skiplock/vercel';
import { idleHints } from '../../../functions/idle-hints';

export const maxDuration = 120;
export const GET = createVercelMaintenance({ maxDurationMs: maxDuration * 1000, idleHints });
