// What nudges, fan-out and continuations request: a background function (its name ends in
// -background), which Netlify answers 202 at once and runs for up to 15 minutes.
import { createNetlifyBackgroundWorker } from 'skiplock/netlify';
import { jobs } from '../../functions/jobs.js';

export default createNetlifyBackgroundWorker(jobs);
