// Where the routes' idle cron ticks keep their hints: Vercel's Runtime Cache (docs/deploy-vercel.md,
// "Idle ticks"). Imported here, not loaded by skiplock at run time, so that Next's file tracing puts
// @vercel/functions into each route's function. Off Vercel (next dev, next start) it is undefined:
// no store, and every tick queries the database.
import { getCache } from '@vercel/functions';
import { vercelRuntimeCache } from 'skiplock/vercel';

export const idleHints = vercelRuntimeCache({ getCache });
