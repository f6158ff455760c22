// functions/jobs.ts of the docs' app: the kinds every entry imports (defined in ../jobs.ts).
export { jobs } from '../jobs.js';
