// functions/jobs.ts of the docs' app: the kinds every entry imports (defined in ../jobs.ts), and
// its recurring schedules (none here; docs/schedules.md).
import type { ScheduleDefinition } from 'skiplock';

export { jobs } from '../jobs.js';
export const schedules: ScheduleDefinition[] = [];
