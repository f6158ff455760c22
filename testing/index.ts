// `skiplock/testing`: what an application's own tests need — a clock that moves only when told,
// a helper that runs the worker until the queue is drained, a test time to run jobs at (days of
// sleeps and waits in milliseconds), Lambda events and contexts, and Neon's drivers pointed at a
// local Postgres, stand-ins that fail on purpose (faults.ts), and a local EventBridge Scheduler that
// fires an idle Lambda app's one-off wake-ups when the test says so (scheduler-endpoint.ts).
export { type Clock, ManualClock } from './clock.js';
export { httpApiEvent, lambdaContext, scheduledEvent } from './events.js';
export { FAULT_MODES, type FaultCounts, type FaultMode, type FaultRule, Faults, type RandomFaults } from './faults.js';
export { type LocalNeon, localNeonOptions, startLocalNeon } from './neon-local.js';
export { type PgProxy, startPgProxy } from './pg-proxy.js';
export { type RunJobsOptions, type RunJobsResult, runJobs } from './run-jobs.js';
export {
  type LocalSchedule,
  type LocalScheduler,
  type SchedulerRefusal,
  startLocalScheduler,
} from './scheduler-endpoint.js';
export { TestTime, type TimeSpan } from './time.js';
