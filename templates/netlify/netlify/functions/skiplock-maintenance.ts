// Maintenance every 10 minutes (deadlines, the activity rollup, retention): a scheduled function
// (30 s at most) that runs the maintenance route with CRON_SECRET, as a cron's request would. It
// runs no worker: no kind has to fit its time (`kinds: []`).
import { createNetlifyRoutes, NETLIFY_LIMITS } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

const routes = createNetlifyRoutes(jobs, {
  routes: { worker: false },
  kinds: [],
  budgetMs: NETLIFY_LIMITS.scheduledMs,
});

export default (request: Request) =>
  routes(
    new Request(new URL('/skiplock/maintenance', request.url), {
      headers: { authorization: `Bearer ${process.env.CRON_SECRET}` },
    }),
  );
export const config = { schedule: '*/10 * * * *' };
