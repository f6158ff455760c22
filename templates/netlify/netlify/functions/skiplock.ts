// Every skiplock route but the worker's (enqueue, replay, control, signal, maintenance and the
// console at /admin), within a synchronous function's 10 s. The worker runs in skiplock-worker and
// skiplock-worker-background, so no kind has to fit this function's time (`kinds: []`).
import { createNetlifyRoutes } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

export default createNetlifyRoutes(jobs, { routes: { worker: false }, kinds: [] });
export const config = { path: ['/skiplock/*', '/admin', '/admin/*'] };
