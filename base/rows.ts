/**
 * What is stored in and read from the jobs table: states, the rows enqueue writes, the jobs a
 * claim hands out, a job as the operator sees it, and the stats rows. Every layer imports these.
 */

/** Every state a job can be in. Terminal: completed, dead (the DLQ), cancelled. */
export const JOB_STATES = ['queued', 'running', 'completed', 'dead', 'cancelled'] as const;

export type JobState = (typeof JOB_STATES)[number];

/** How a dedupe key is enforced (see EnqueueOptions.dedupe). */
export const DEDUPE_MODES = ['skip', 'replace', 'window'] as const;

export type DedupeMode = (typeof DEDUPE_MODES)[number];

/** One row as the insert statement takes it (snake_case, JSON-ready). */
export interface JobInsertRow {
  ord: number;
  kind: string;
  queue: string;
  /** The validated payload as JSON text, written into the statement's input as it is. */
  payload_json: string;
  priority: number;
  run_at: string | null;
  delay_ms: number | null;
  max_attempts: number;
  deadline: string | null;
  dedupe_key: string | null;
  dedupe_mode: 'skip' | 'replace' | 'window' | null;
  window_ms: number | null;
  correlation_id: string | null;
  ordering_key: string | null;
  ordering_hold: boolean;
  concurrency_key: string | null;
  destination: string | null;
  /** Existing jobs this one waits for (enqueue `after`), or null. */
  after_ids?: string[] | null;
  /** Rows of the same call this one waits for, by ord (a flow), or null. */
  after_ords?: number[] | null;
  /** What a parent's death or cancellation does to this job; null without parents. */
  on_parent_failure?: 'cancel' | 'run' | null;
  /** The enqueue's trace context (tracing on), or null. */
  trace_context?: Record<string, string> | null;
}

export interface ClaimedJob {
  id: string;
  kind: string;
  queue: string;
  payload: unknown;
  priority: number;
  attempt: number;
  maxAttempts: number;
  /** The claim's lease token, shared by every job the statement claimed. */
  leaseToken: string;
  correlationId: string | null;
  /** Its ordering key: the next job of the key is released when this one ends. */
  orderingKey?: string | null;
  /** Its destination: what the attempt did to it is recorded for its breaker. */
  destination?: string | null;
  /** The progress an earlier attempt reported (null when none did). */
  progress?: unknown;
  /** The trace context its enqueue stored (tracing on), which its attempts' spans link to. */
  traceContext?: Record<string, string>;
}

/** Rows moved to the DLQ instead of running (deadline passed, attempts exhausted by rescues). */
export interface ClaimDeadJob {
  id: string;
  kind: string;
  queue: string;
  attempt: number;
  reason: 'deadline_exceeded' | 'lease_expired';
  correlationId: string | null;
}

/** One job, everything about it (CLI `jobs show`, tests). */
export interface JobRecord {
  id: string;
  kind: string;
  queue: string;
  payload: unknown;
  priority: number;
  state: JobState;
  runAt: Date;
  attempt: number;
  maxAttempts: number;
  dedupeKey: string | null;
  dedupeMode: string | null;
  leaseToken: string | null;
  leaseExpiresAt: Date | null;
  lockedBy: string | null;
  deadline: Date | null;
  lastError: Record<string, unknown> | null;
  errors: Record<string, unknown>[];
  deadReason: string | null;
  progress: unknown;
  /** What the handler returned when the job completed (null: nothing, or not completed). */
  result: unknown;
  correlationId: string | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  attemptedAt: Date | null;
  finishedAt: Date | null;
  replayCount: number;
  replayedAt: Date | null;
  replayedBy: string | null;
  /** The jobs this one waits for (enqueue `after`); empty without. */
  after: string[];
  /** The jobs waiting for this one. */
  dependents: string[];
  /** What a parent's death or cancellation does to it (null without parents). */
  onParentFailure: 'cancel' | 'run' | null;
  /** The durable steps it reached, in order (getJob only; absent from lists). */
  steps?: JobStep[];
}

/** A durable step a job reached (`ctx.step`, `ctx.sleep`, `ctx.waitForSignal`), as getJob shows it. */
export interface JobStep {
  name: string;
  /** 0 for the first step the job reached. */
  position: number;
  type: 'run' | 'sleep' | 'signal';
  /**
   * waiting: a wait for a signal that has not ended (until `timeoutAt`); sleeping: a sleep that has
   * not ended (until `wakeAt`: the job is queued until then).
   */
  state: 'completed' | 'failed' | 'waiting' | 'sleeping';
  /** Attempts of this step (its retries do not use the job's). */
  attempts: number;
  durationMs: number | null;
  /** The stored result's size in bytes of JSON (null: none). */
  resultBytes: number | null;
  lastError: Record<string, unknown> | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  /** A wait's key and when it times out. */
  signalKey: string | null;
  timeoutAt: Date | null;
  /** When a sleep ends (ended, for a completed one). */
  wakeAt: Date | null;
}

/** A parent as its child's handler reads it (`ctx.parents()`). */
export interface ParentJob {
  id: string;
  /** Null when the row is gone: deleted when it completed (completedJobs 'delete'), or pruned. */
  kind: string | null;
  state: JobState | null;
  /** What its handler returned (null: nothing, or its row is gone). */
  result: unknown;
}

export interface QueueStatsRow {
  queue: string;
  kind: string;
  ready: number;
  scheduled: number;
  retryWaiting: number;
  /** Jobs waiting for others to end: ordering-key followers, and jobs waiting for their parents (`after`). */
  waiting: number;
  running: number;
  leaseExpired: number;
  /** The DLQ: every dead job still kept. */
  dead: number;
  completedLastHour: number;
  deadLastHour: number;
  cancelledLastHour: number;
  oldestReadyAgeSeconds: number | null;
  /** Of the scheduled and retry-waiting jobs: those sleeping in a durable step (`ctx.sleep`). */
  sleeping: number;
  /** Of the scheduled and retry-waiting jobs: those waiting for a signal (`ctx.waitForSignal`). */
  waitingForSignal: number;
  /**
   * Ready jobs wait and no worker served this queue and kind in the last 10 minutes, although workers
   * did record themselves: no deployed worker lists this queue (or kind).
   */
  unserved: boolean;
  /**
   * Ready jobs wait, and every worker that served this queue and kind in the last 10 minutes has
   * invocations too short for the kind's timeoutMs (it never claims it): `budgetMs` is the longest
   * time one of them had for attempts. Raise the function's timeout or lower the kind's timeoutMs.
   * Null otherwise, and while no such worker recorded its budget.
   */
  unfit: { budgetMs: number } | null;
  /** Set while the queue or the kind is paused (the queue's pause first, when both are). */
  paused: { scope: 'queue' | 'kind'; since: Date; by: string } | null;
}

export interface QueueActivityRow {
  queue: string;
  kind: string;
  completed: number;
  dead: number;
  cancelled: number;
  throughputPerSecond: number;
  /** Share of the jobs that finished in the window which died; null when none finished. */
  errorRate: number | null;
}

export interface KindOutcomes {
  kind: string;
  total: number;
  queued: number;
  running: number;
  completed: number;
  dead: number;
  cancelled: number;
  /** Failed attempts recorded in the jobs' error histories (each is capped at the last 10). */
  failedAttempts: number;
  /** Dead jobs by reason. */
  deadReasons: Record<string, number>;
}
