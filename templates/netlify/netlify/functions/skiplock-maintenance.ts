// Maintenance every 10 minutes (deadlines, the activity rollup, retention): a scheduled function
// (30 s at most) that runs a maintenance tick, as Netlify's own run of it needs no secret.
import { createNetlifyScheduledMaintenance } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

export default createNetlifyScheduledMaintenance(jobs);
export const config = { schedule: '*/10 * * * *' };
