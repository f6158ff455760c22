// The public API of skiplock: `import { defineJob, enqueue, createWorker, … } from 'skiplock'`.
// Only what an application calls or names: the functions, their options and results, the errors it
// catches, the defaults it may read. Helpers the adapters, the CLI and the tests share are imported
// from their modules (e.g. isSubscriber from core/events.ts), so the package root does not promise them.

export * from '../base/errors.js';
export { DEFAULT_SCHEMA } from '../base/identifiers.js';
export type { ReplayResult } from '../base/outcomes.js';
export {
  type AnyPgDatabase,
  CONNECT_DEFAULTS,
  type ConnectOptions,
  connect,
  DRIVERS,
  type Driver,
  type DrizzleFactory,
  type SkiplockConnection,
  type SkiplockDb,
} from '../db/connect.js';
export { toSkiplockError } from '../db/execute.js';
export type { Executor, HotStatementHint } from '../db/executor.js';
export { type MigrateOptions, type MigrateResult, migrate } from '../db/migrate.js';
export { type QueryFunction, queryExecutor } from '../db/query-executor.js';
export { JOB_STATES, type JobState, jobs, jobsTableFor } from '../db/schema.js';
export {
  type ActivityBucket,
  activity,
  activitySeries,
  type CancelOutcome,
  cancel,
  expireDeadlines,
  getJob,
  type JobRecord,
  type ListJobsOptions,
  listJobs,
  type MoveToDlqOutcome,
  moveToDlq,
  type ParentJob,
  type QueueActivityRow,
  type QueueStatsRow,
  type RetryNowOutcome,
  retryNow,
  rollUpActivity,
  stats,
} from './admin.js';
export { BACKOFF_DEFAULTS, type BackoffOption } from './backoff.js';
export {
  type BatchContext,
  type BatchHandler,
  type BatchJob,
  type BatchJobDefinition,
  type BatchJobKindOptions,
  type BatchOptions,
  type BatchOutcome,
  defineBatchJob,
  MAX_BATCH_SIZE,
  MAX_BATCH_WAIT_MS,
} from './batches.js';
export { type BreakerState, breakers, type DestinationHealth, resetBreaker } from './breakers.js';
export { type Clock, systemClock } from './clock.js';
export {
  type ControlOptions,
  clearLimit,
  type FlowControlOptions,
  type LimitOverride,
  type LimitScope,
  type LimitTarget,
  limits,
  type Pause,
  type PauseScope,
  type PauseTarget,
  pause,
  pauses,
  resume,
  setLimit,
} from './controls.js';
export { BREAKER_DEFAULTS, type BreakerSettings, countsAgainstDestination } from './destinations.js';
export {
  createEnqueuer,
  ENQUEUE_DEFAULTS,
  type EnqueueConfig,
  type EnqueueResult,
  type Enqueuer,
  type EnqueueTarget,
  enqueue,
  enqueueByKind,
  enqueueChain,
  enqueueFlow,
  enqueueMany,
  publish,
  signal,
} from './enqueue.js';
export type { DedupeOption, EnqueueOptions } from './enqueue-options.js';
export {
  type Delivered,
  defineEvent,
  type EventDefinition,
  type EventDelivery,
  type EventRecord,
  getEvent,
  type ListEventsOptions,
  listEvents,
  listSubscriptions,
  type PayloadPath,
  type PreparedPublish,
  type PublishOptions,
  type PublishResult,
  type ReplayEventsOptions,
  replayEvents,
  retireSubscriptions,
  type SubscriberDefinition,
  type SubscriberOptions,
  type SubscriptionRecord,
  subscribe,
  syncSubscriptions,
  unsubscribedEvents,
} from './events.js';
export { type ExplainOptions, explain, type JobExplanation, type JobHold } from './explain.js';
export {
  defineJob,
  defineQueue,
  JOB_DEFAULTS,
  type JobContext,
  type JobDefinition,
  type JobHandler,
  type JobKindOptions,
  JobRegistry,
  type JobRequest,
  type QueueDefinition,
  type QueueOptions,
  type StepOptions,
  type TransactionalJobContext,
  type TransactionalStepOptions,
} from './jobs.js';
export { jsonLogger, type Logger, silentLogger } from './logger.js';
export {
  MAINTENANCE_DEFAULTS,
  type MaintenanceOptions,
  type MaintenanceReport,
  runMaintenance,
} from './maintenance.js';
export type { JobMetrics, MeteredJob, MeteredOutcome, QueueMetrics } from './metrics.js';
export { createNudger, type DueWrite, NUDGE_DEFAULTS, type Nudger, type NudgerOptions } from './nudge.js';
export {
  clearRateLimit,
  type RateLimit,
  type RateLimitOverride,
  type RateLimitScope,
  type RateLimitTarget,
  type RateUse,
  rateLimits,
  setRateLimit,
} from './rate-limits.js';
export { REPLAY_DEFAULTS, type ReplayOptions, replay } from './replay.js';
export {
  type ApplySchedulesResult,
  applySchedules,
  createSchedule,
  createScheduler,
  deleteSchedule,
  getSchedule,
  listRuntimeSchedules,
  type PreparedScheduleChange,
  pauseSchedule,
  RUNTIME_TICK_DEFAULTS,
  type RuntimeScheduleJobOptions,
  type RuntimeScheduleRecord,
  type RuntimeScheduleSpec,
  type RuntimeTickOptions,
  type RuntimeTickResult,
  resumeSchedule,
  runRuntimeSchedules,
  type Scheduler,
  type SchedulerConfig,
  type ScheduleWriteOptions,
  type ScheduleWriteResult,
  updateSchedule,
  upsertSchedule,
} from './runtime-schedules.js';
export {
  defineSchedule,
  dueOccurrences,
  listSchedules,
  type MissedPolicy,
  runSchedules,
  SCHEDULE_DEFAULTS,
  type ScheduleDefinition,
  type ScheduleEnqueueOptions,
  type ScheduleOptions,
  type ScheduleStatus,
  type ScheduleTickOptions,
  type ScheduleTickResult,
} from './schedules.js';
export {
  createSignalToken,
  readSignalToken,
  SIGNAL_SECRET_MIN_LENGTH,
  SIGNAL_TOKEN_DEFAULTS,
  type SignalTokenClaims,
  type SignalTokenOptions,
} from './signal-tokens.js';
export type { PreparedSignal, SignalOptions, SignalResult } from './signals.js';
export {
  deliverWebhook,
  retryAfterMs,
  signWebhook,
  verifyWebhook,
  WEBHOOK_DEFAULTS,
  type WebhookDelivery,
  WebhookVerificationError,
} from './webhooks.js';
export {
  createWorker,
  type InvocationInput,
  type InvocationStarter,
  type InvocationSummary,
  WORKER_DEFAULTS,
  type Worker,
  type WorkerOptions,
} from './worker/index.js';
