// Every skiplock route but the worker's (enqueue, replay, control, signal, maintenance and the
// console at /admin), within a synchronous function's 10 s. The worker runs in skiplock-worker and
// skiplock-worker-background; this function runs none, so no kind has to fit its time.
import { createNetlifyRoutes } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

export default createNetlifyRoutes(jobs, { routes: { worker: false } });
export const config = { path: ['/skiplock/*', '/admin', '/admin/*'] };
