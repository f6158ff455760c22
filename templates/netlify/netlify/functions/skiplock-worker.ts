// The worker each minute: a scheduled function (30 s at most), which also enqueues the schedules'
// occurrences as it starts.
import { createNetlifyScheduledWorker } from 'skiplock/netlify';
import { jobs, schedules } from '../../functions/jobs.js';

export default createNetlifyScheduledWorker(jobs, { schedules });
export const config = { schedule: '* * * * *' };
