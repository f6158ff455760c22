// Recurring schedules (docs/schedules.md).
import { connect, createWorker, defineJob, defineSchedule, listSchedules, runSchedules } from 'skiplock';
import { z } from 'zod';

const db = connect({ connectionString: process.env.DATABASE_URL! });
declare function buildReport(day: string): Promise<void>;

// #region schedule
export const dailyReport = defineJob({
  kind: 'daily-report',
  payload: z.object({ day: z.string() }),
  handler: async (p) => buildReport(p.day),
});

export const schedules = [
  // Every day at 03:00 in Berlin, across daylight-saving changes; the payload names the day.
  defineSchedule({
    name: 'daily-report',
    cron: '0 3 * * *',
    timezone: 'Europe/Berlin',
    job: dailyReport,
    payload: (at) => ({ day: at.toISOString().slice(0, 10) }),
    missed: 'last', // after downtime: run the newest missed day once (or 'skip', or a number)
  }),
  // Every 15 minutes, UTC, with a fixed payload and enqueue options.
  defineSchedule({
    name: 'refresh',
    cron: '*/15 * * * *',
    job: dailyReport,
    payload: { day: 'today' },
    options: { priority: 10 },
  }),
];

// The worker ticks them as each invocation starts (the scheduler's minute tick drives it).
export const worker = createWorker({ db, jobs: [dailyReport], schedules });
// #endregion schedule

// #region schedule-ops
// Anywhere else (a script, a test): tick by hand, and list them with their next occurrence.
const tick = await runSchedules(db, schedules);
console.log(tick.enqueued); // [{ schedule, occurrence, jobId }]
console.log(await listSchedules(db, { defined: schedules })); // last and next occurrence, last job
// #endregion schedule-ops
