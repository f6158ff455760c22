// The functions/jobs.ts `skiplock init` writes (this repository's own): the examples beside it are
// laid out as an app made by init is.
export { jobs, schedules } from '../../../../functions/jobs.js';
