// A Deno Deploy app serving skiplock (docs/deploy-deno.md).
// #region deno-deploy
import { serveDeno } from 'skiplock/deno';
import { jobs } from './jobs.js';

// Every route on Deno.serve; Deno.cron runs the worker each minute.
serveDeno(jobs);
// #endregion deno-deploy
