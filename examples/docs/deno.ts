// A Deno Deploy app serving skiplock (docs/deploy-deno.md).
// #region deno-deploy
import { serveDeno } from 'skiplock/deno';
import { jobs } from './jobs.js';

// Every route on Deno.serve; Deno.cron runs the worker each minute, maintenance every 10.
serveDeno(jobs);
// #endregion deno-deploy
