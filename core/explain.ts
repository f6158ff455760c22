import { InvalidOptionsError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from '../db/connect.js';
import { eventOfJob } from '../db/statements/events.js';
import { type ExplainEvidence, explainJob } from '../db/statements/explain.js';
import { getJobs } from '../db/statements/jobs-read.js';
import { declaredLimits, declaredRateLimits, declaredWindows, type JobDefinition } from './jobs.js';

/** Why a job does not run now — one reason, with its evidence and when it ends (null: not by itself). */
export interface JobHold {
  reason:
    | 'finished'
    | 'running'
    | 'lease_expired'
    | 'scheduled'
    | 'retry_waiting'
    | 'sleeping'
    | 'waiting_for_signal'
    | 'parents'
    | 'ordering_key'
    | 'paused'
    | 'run_window'
    | 'concurrency_limit'
    | 'rate_limit'
    | 'breaker_open'
    | 'destination_deferred'
    | 'deadline_passed'
    | 'no_worker'
    | 'no_worker_fits';
  message: string;
  until: Date | null;
}

export interface JobExplanation {
  id: string;
  kind: string;
  queue: string;
  state: string;
  /** Every hold on the job now; empty when it is ready. */
  holds: JobHold[];
  /** Queued, due and held by nothing: the next claim of its queue that reaches it takes it. */
  ready: boolean;
  /**
   * Ready jobs of its queue ahead of it in claim order (priority, run_at, id), not counting jobs of a
   * paused kind (no claim takes them); null unless it is ready.
   */
  readyAhead: number | null;
  /** One line: ready, or the holds. */
  summary: string;
  /** The event and subscription the job was written for (`publish`), while the event is kept; else null. */
  origin: { eventId: string; name: string; subscription: string; publishedAt: Date } | null;
}

export interface ExplainOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
  /**
   * The kinds your workers run: the concurrency limits, rates and run windows their code declares
   * (the database holds only the ones set at run time). @defaultValue none
   */
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs?: readonly JobDefinition<any, any>[];
  /** The database's clock, for tests. @defaultValue now */
  now?: Date;
}

/**
 * "Why isn't my job running?": every rule holding the job back now, each with its evidence and when
 * it ends — or that it is ready, and how many ready jobs are ahead of it. Null for an unknown id.
 */
export async function explain(
  conn: SkiplockConnection,
  id: string,
  options: ExplainOptions = {},
): Promise<JobExplanation | null> {
  if (!/^[1-9][0-9]{0,18}$/.test(id)) throw new InvalidOptionsError('a job id is a positive integer');
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const [row] = await getJobs(conn.executor, schema, [id]);
  if (!row) return null;
  const jobs = options.jobs ?? [];
  const evidence = await explainJob(
    conn.executor,
    schema,
    { id, kind: row.kind },
    { limits: declaredLimits(jobs), rateLimits: declaredRateLimits(jobs), windows: declaredWindows(jobs) },
    options.now,
  );
  if (!evidence.job) return null;
  const origin = await eventOfJob(conn.executor, schema, id);
  return { ...explanationOf(evidence, jobs.find((j) => j.kind === row.kind)?.timeoutMs), origin };
}

const at = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms));
const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? '?' : new Date(ms).toISOString());

/**
 * The holds the evidence shows, in the order an operator would look at them. `timeoutMs`: the job's
 * kind's, when the caller's kinds name it (for the no_worker_fits message).
 */
export function explanationOf(e: ExplainEvidence, timeoutMs?: number): Omit<JobExplanation, 'origin'> {
  const job = e.job as NonNullable<ExplainEvidence['job']>;
  const holds: JobHold[] = [];
  const hold = (reason: JobHold['reason'], message: string, until: number | null = null) =>
    holds.push({ reason, message, until: at(until) });
  const now = e.nowMs;
  if (job.state === 'completed' || job.state === 'cancelled' || job.state === 'dead') {
    const how = job.state === 'dead' ? `dead (${job.deadReason}): replay it to run it again` : job.state;
    hold('finished', `it finished at ${iso(job.finishedAtMs)}: ${how}`);
  } else if (job.state === 'running') {
    if (job.leaseExpiresAtMs !== null && job.leaseExpiresAtMs <= now) {
      hold(
        'lease_expired',
        `its lease (held by ${job.lockedBy ?? '?'}) ran out at ${iso(job.leaseExpiresAtMs)}: the next claim of its kind rescues it`,
      );
    } else {
      hold(
        'running',
        `it is running: attempt ${job.attempt} of ${job.maxAttempts}, held by ${job.lockedBy ?? '?'} until ${iso(job.leaseExpiresAtMs)}`,
        job.leaseExpiresAtMs,
      );
    }
  } else {
    if (job.deadlineMs !== null && job.deadlineMs <= now) {
      hold(
        'deadline_passed',
        `its deadline passed at ${iso(job.deadlineMs)}: the next invocation moves it to the DLQ (deadline_exceeded)`,
      );
    }
    const notDone = e.parents.filter((p) => p.state !== 'completed');
    if (notDone.length > 0) {
      hold(
        'parents',
        `it waits for ${notDone.map((p) => `job ${p.id} (${p.state ?? 'gone'})`).join(', ')} to complete`,
      );
    }
    if (e.orderingHolder) {
      hold(
        'ordering_key',
        `job ${e.orderingHolder.id} (${e.orderingHolder.state}) holds its ordering key ${JSON.stringify(job.orderingKey)}: it runs after it`,
      );
    }
    const step = e.lastStep;
    if (job.runAtMs !== null && job.runAtMs > now) {
      if (step?.state === 'waiting') {
        hold(
          'waiting_for_signal',
          `it waits for the signal ${JSON.stringify(step.signalKey)} (step ${step.name}) until ${iso(step.timeoutAtMs)}`,
          job.runAtMs,
        );
      } else if (step?.type === 'sleep') {
        hold('sleeping', `it sleeps (step ${step.name}) until ${iso(job.runAtMs)}`, job.runAtMs);
      } else if (job.attempt > 0) {
        hold('retry_waiting', `attempt ${job.attempt} failed; it retries at ${iso(job.runAtMs)}`, job.runAtMs);
      } else {
        hold('scheduled', `it is scheduled for ${iso(job.runAtMs)}`, job.runAtMs);
      }
    }
    for (const p of e.pauses) {
      hold(
        'paused',
        `its ${p.scope} ${p.name} is paused since ${iso(p.pausedAtMs)} by ${p.pausedBy}${p.reason ? ` (${p.reason})` : ''}: resume it to go on`,
      );
    }
    for (const w of e.windowsShut) {
      hold(
        'run_window',
        `the run window of its ${w.scope} ${w.name} is shut now; it opens at ${iso(w.opensAtMs)}`,
        w.opensAtMs,
      );
    }
    for (const l of e.limits.filter((x) => x.running >= x.maxRunning)) {
      const what =
        l.scope === 'key' ? `key ${JSON.stringify(job.concurrencyKey)} in queue ${l.name}` : `${l.scope} ${l.name}`;
      hold('concurrency_limit', `${what} is at its concurrency limit: ${l.running} running of ${l.maxRunning}`);
    }
    for (const r of e.rates.filter((x) => x.used >= x.maxStarts)) {
      hold(
        'rate_limit',
        `the rate of ${r.scope} ${r.name} is used up: ${r.used} starts of ${r.maxStarts} per ${r.periodMs} ms; the next token comes at ${iso(r.nextAtMs)}`,
        r.nextAtMs,
      );
    }
    const d = e.destination;
    if (d && d.state === 'open') {
      hold(
        'breaker_open',
        `the circuit breaker of ${job.destination} is open until ${iso(d.openUntilMs)}`,
        d.openUntilMs,
      );
    } else if (d && d.state === 'half_open') {
      hold('breaker_open', `the circuit breaker of ${job.destination} is half-open: one probe job runs first`);
    }
    if (d?.deferredUntilMs) {
      hold(
        'destination_deferred',
        `${job.destination} asked to wait (Retry-After) until ${iso(d.deferredUntilMs)}`,
        d.deferredUntilMs,
      );
    }
    if (e.workers.known && !e.workers.serving) {
      hold(
        'no_worker',
        `no worker served queue ${job.queue} with kind ${job.kind} in the last 10 minutes: does a deployed worker list them?`,
      );
    } else if (e.workers.serving && !e.workers.fitting) {
      hold(
        'no_worker_fits',
        `no invocation of the workers that serve queue ${job.queue} fits kind ${job.kind}'s timeoutMs${timeoutMs === undefined ? '' : ` (${timeoutMs} ms)`}: the longest has ${e.workers.budgetMs ?? '?'} ms for attempts (the function's time less safetyMarginMs); raise the function's timeout or lower the kind's timeoutMs`,
      );
    }
  }
  const ready = job.state === 'queued' && holds.length === 0;
  return {
    id: job.id,
    kind: job.kind,
    queue: job.queue,
    state: job.state,
    holds,
    ready,
    readyAhead: ready ? e.readyAhead : null,
    summary: ready
      ? `job ${job.id} is ready: ${e.readyAhead ?? 0} ready job(s) of queue ${job.queue} are ahead of it`
      : holds.map((h) => h.message).join('; '),
  };
}
