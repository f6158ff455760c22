import { randomUUID } from 'node:crypto';
import type { SkiplockDb } from '../db/connect.js';
import { scrubSecrets } from '../db/execute.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../db/identifiers.js';
import { buryDoomed, type ClaimedJob, claimJobs } from '../db/statements/claim.js';
import {
  extendLease,
  type Outcome,
  releaseJobs,
  reportProgress,
  type SettledJob,
  settleJobs,
} from '../db/statements/settle.js';
import { toBackoff } from './backoff.js';
import { type Clock, systemClock } from './clock.js';
import { ConfigError, DatabaseError, DiscardError, SkiplockError } from './errors.js';
import { decideFailure } from './failure.js';
import { describeIssues } from './issues.js';
import { JobAbort, JobRun, jobFields } from './job-run.js';
import type { JobDefinition, JobHandler } from './jobs.js';
import { jsonLogger, type Logger } from './logger.js';

export interface WorkerOptions {
  db: SkiplockDb;
  /** The kinds this worker runs. Each needs a handler, here or in `handlers`. */
  // biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
  jobs: readonly JobDefinition<any, any>[];
  /** Handlers by kind, for kinds defined without one (e.g. shared definitions). */
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  handlers?: Record<string, JobHandler<any, any>>;
  /** @defaultValue 'skiplock' */
  schema?: string;
  /** Only claim jobs in these queues. @defaultValue all queues */
  queues?: readonly string[];
  /** Handlers running at once. @defaultValue 10 */
  concurrency?: number;
  /** Jobs claimed per statement; extra ones wait locally and are released if time runs out. @defaultValue concurrency */
  batchSize?: number;
  /** Stop claiming this long before the deadline; the time left is for writing outcomes. @defaultValue 1000 */
  safetyMarginMs?: number;
  /** Lease = the kind's timeout + this grace. @defaultValue 5000 */
  leaseGraceMs?: number;
  /** Keep claiming while work remains and time allows; false = one batch per invocation. @defaultValue true */
  drain?: boolean;
  /** Buffered outcomes are written at least this often. @defaultValue 200 */
  flushIntervalMs?: number;
  /** @defaultValue jsonLogger() */
  logger?: Logger;
  /** @defaultValue the system clock */
  clock?: Clock;
}

export interface InvocationInput {
  /** Milliseconds this invocation may run (Lambda's getRemainingTimeInMillis(), Vercel's maxDuration). */
  remainingMs: number;
  /** Identifies the invocation in locked_by and logs. @defaultValue a random UUID */
  invocationId?: string;
}

export interface InvocationSummary {
  invocationId: string;
  claimed: number;
  completed: number;
  retried: number;
  dead: number;
  cancelled: number;
  released: number;
  leaseLost: number;
  durationMs: number;
  /** drained: no runnable work left; deadline: out of time; error: the database failed. */
  stoppedBecause: 'drained' | 'deadline' | 'batch_done' | 'error';
  error?: string;
  /** With stoppedBecause 'error': the SQLSTATE when the database sent one, else the error code. */
  errorCode?: string;
}

export const WORKER_DEFAULTS = {
  concurrency: 10,
  safetyMarginMs: 1_000,
  leaseGraceMs: 5_000,
  drain: true,
  flushIntervalMs: 200,
} as const;

interface Kind {
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  definition: JobDefinition<any, any>;
  // biome-ignore lint/suspicious/noExplicitAny: see above.
  handler: JobHandler<any, any>;
}

interface Buffered {
  outcome: Outcome;
  job: ClaimedJob;
  startedAt: number;
  reason?: string;
}

export interface Worker {
  runInvocation(input: InvocationInput): Promise<InvocationSummary>;
}

/** Builds the invocation loop for a set of kinds. It knows nothing of Lambda or Vercel. */
export function createWorker(options: WorkerOptions): Worker {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const concurrency = options.concurrency ?? WORKER_DEFAULTS.concurrency;
  const batchSize = options.batchSize ?? concurrency;
  const safetyMarginMs = options.safetyMarginMs ?? WORKER_DEFAULTS.safetyMarginMs;
  const leaseGraceMs = options.leaseGraceMs ?? WORKER_DEFAULTS.leaseGraceMs;
  const drain = options.drain ?? WORKER_DEFAULTS.drain;
  const flushIntervalMs = options.flushIntervalMs ?? WORKER_DEFAULTS.flushIntervalMs;
  const logger = options.logger ?? jsonLogger();
  const clock = options.clock ?? systemClock;
  // Building a log line per completed job costs more than a no-op job: skip it when nobody listens.
  const infoLogs = logger.isEnabled?.('info') ?? true;
  const { db } = options;
  const queues = options.queues?.map((q) => assertLabel('queue', q));
  for (const [name, value] of [
    ['concurrency', concurrency],
    ['batchSize', batchSize],
  ] as const) {
    if (!Number.isInteger(value) || value < 1 || value > 1000)
      throw new ConfigError(`${name} must be an integer from 1 to 1000`);
  }
  if (!(safetyMarginMs >= 0) || !(leaseGraceMs >= 0))
    throw new ConfigError('safetyMarginMs and leaseGraceMs must be >= 0');

  const kinds = new Map<string, Kind>();
  for (const definition of options.jobs) {
    const handler = options.handlers?.[definition.kind] ?? definition.handler;
    if (!handler) throw new ConfigError(`job kind ${definition.kind} has no handler`);
    if (definition.transactional && !db.interactiveTransactions) {
      throw new ConfigError(
        `job kind ${definition.kind} is transactional, but the ${db.driver} driver has no interactive transactions; use pg or neon-ws`,
      );
    }
    kinds.set(definition.kind, { definition, handler });
  }
  if (kinds.size === 0) throw new ConfigError('a worker needs at least one job kind');

  async function runInvocation(input: InvocationInput): Promise<InvocationSummary> {
    const invocationId = input.invocationId ?? randomUUID();
    const startedAt = clock.now();
    const deadlineAt = startedAt + Math.max(0, input.remainingMs);
    const stopClaimingAt = deadlineAt - safetyMarginMs;
    const summary: InvocationSummary = {
      invocationId,
      claimed: 0,
      completed: 0,
      retried: 0,
      dead: 0,
      cancelled: 0,
      released: 0,
      leaseLost: 0,
      durationMs: 0,
      stoppedBecause: 'drained',
    };
    const waiting: ClaimedJob[] = [];
    const inflight = new Map<string, Promise<void>>();
    let buffer: Buffered[] = [];
    let oldestBufferedAt = 0;
    let claimRounds = 0;
    let claimedAt = startedAt;
    let queueLooksEmpty = false;

    const fits = (kind: Kind) => clock.now() + kind.definition.timeoutMs <= stopClaimingAt;

    /** Counts and logs what the database did with a batch of outcomes. */
    const account = (batch: Buffered[], settledJobs: SettledJob[]) => {
      const settled = new Map(settledJobs.map((s) => [s.id, s]));
      for (const item of batch) {
        const result = settled.get(item.job.id);
        const fields = jobFields(item.job, invocationId);
        const durationMs = clock.now() - item.startedAt;
        if (!result) {
          summary.leaseLost++;
          logger.warn('lease_lost', { ...fields, outcome: 'lease_lost', durationMs });
          continue;
        }
        if (result.state === 'completed') summary.completed++;
        else if (result.state === 'queued') summary.retried++;
        else if (result.state === 'dead') summary.dead++;
        else summary.cancelled++;
        const outcome = result.state === 'queued' ? 'retry' : result.state;
        if (outcome === 'completed' && !infoLogs) continue;
        const log = outcome === 'completed' ? logger.info : logger.warn;
        log.call(logger, 'job', {
          ...fields,
          outcome,
          durationMs,
          ...(result.state === 'queued' ? { nextRunAt: result.runAt.toISOString() } : {}),
          ...(result.deadReason ? { reason: result.deadReason } : {}),
          ...(item.reason && result.state !== 'completed' ? { error: item.reason } : {}),
        });
      }
    };

    const flush = async () => {
      if (buffer.length === 0) return;
      const batch = buffer;
      buffer = [];
      cancelFlushTimer?.();
      account(
        batch,
        await settleJobs(
          db.db,
          schema,
          batch.map((b) => b.outcome),
        ),
      );
    };

    // Buffered outcomes must not wait behind slow jobs: the first one arms a timer that wakes
    // the loop after flushIntervalMs, whatever it is waiting for.
    let wake: () => void = () => {};
    let woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    let cancelFlushTimer: (() => void) | undefined;
    const rearmWake = () => {
      woken = new Promise<void>((resolve) => {
        wake = resolve;
      });
    };
    const record = (item: Buffered) => {
      if (buffer.length === 0) {
        oldestBufferedAt = clock.now();
        cancelFlushTimer?.();
        cancelFlushTimer = clock.setTimer(() => wake(), flushIntervalMs);
      }
      buffer.push(item);
    };

    // One timer for the whole invocation: it fires at the earliest timeout among the running
    // attempts (or the invocation's deadline) and aborts whatever is due.
    const running = new Set<JobRun>();
    let watchdogAt = Number.POSITIVE_INFINITY;
    let cancelWatchdog: (() => void) | undefined;
    const armWatchdog = (at: number) => {
      if (at >= watchdogAt) return;
      cancelWatchdog?.();
      watchdogAt = at;
      cancelWatchdog = clock.setTimer(fireWatchdog, at - clock.now());
    };
    const fireWatchdog = () => {
      watchdogAt = Number.POSITIVE_INFINITY;
      cancelWatchdog = undefined;
      const now = clock.now();
      let next = Number.POSITIVE_INFINITY;
      for (const run of running) {
        if (run.timeoutAt <= now) {
          run.abort(
            new JobAbort('timeout', `timed out after ${(kinds.get(run.kind) as Kind).definition.timeoutMs} ms`),
          );
        } else if (stopClaimingAt <= now) {
          run.abort(new JobAbort('invocation_deadline', 'the invocation reached its deadline'));
        } else {
          next = Math.min(next, run.timeoutAt, stopClaimingAt);
        }
      }
      if (next < Number.POSITIVE_INFINITY) armWatchdog(next);
    };
    const runDeps = {
      logger,
      invocationId,
      reportProgress: (holder: { id: string; leaseToken: string }, progress: unknown) =>
        reportProgress(db.db, schema, holder, progress),
      extendLease: async (holder: { id: string; leaseToken: string }, ms: number) =>
        (await extendLease(db.db, schema, holder, ms)) !== null,
    };

    const start = (job: ClaimedJob) => {
      const kind = kinds.get(job.kind) as Kind;
      const run = new JobRun(job, clock.now() + kind.definition.timeoutMs, runDeps);
      running.add(run);
      armWatchdog(Math.min(run.timeoutAt, stopClaimingAt));
      const done = runJob(run, kind).then((item) => {
        running.delete(run);
        if (item === 'completed_in_transaction') {
          summary.completed++;
          if (infoLogs) logger.info('job', { ...jobFields(job, invocationId), outcome: 'completed' });
        } else if (item === 'lease_lost') {
          summary.leaseLost++;
          logger.warn('lease_lost', { ...jobFields(job, invocationId), outcome: 'lease_lost' });
        } else {
          record(item);
        }
      });
      inflight.set(
        job.id,
        done.finally(() => inflight.delete(job.id)),
      );
    };

    try {
      // First, the rows no claim may run (past their deadline, rescues with no attempt left)
      // go to the DLQ; the claim statement stays lean because it never has to decide that.
      for (const job of await buryDoomed(db.db, schema, { kinds: [...kinds.keys()], queues, limit: 1000 })) {
        summary.dead++;
        logger.warn('job', { ...jobFields(job, invocationId), outcome: 'dead', reason: job.reason });
      }
      while (true) {
        // Outcomes normally ride along with the next claim; they are written on their own only
        // when they have waited flushIntervalMs, or pile up while a claimed batch is still
        // being worked through.
        const shouldFlush =
          buffer.length > 0 &&
          (clock.now() - oldestBufferedAt >= flushIntervalMs || (waiting.length > 0 && buffer.length >= concurrency));
        if (shouldFlush) await flush();

        // Start waiting jobs while slots are free; give back the ones that no longer fit.
        const release: ClaimedJob[] = [];
        while (inflight.size < concurrency && waiting.length > 0) {
          const job = waiting.shift() as ClaimedJob;
          const kind = kinds.get(job.kind) as Kind;
          // Its lease started at the claim: a job that waited locally too long to finish inside
          // it is given back rather than started (someone else could rescue it mid-run).
          const leaseLeft = claimedAt + kind.definition.timeoutMs + leaseGraceMs - clock.now();
          if (fits(kind) && leaseLeft >= kind.definition.timeoutMs) start(job);
          else release.push(job);
        }
        if (waiting.length > 0 && !Array.from(kinds.values()).some(fits)) release.push(...waiting.splice(0));
        if (release.length > 0) {
          const released = await releaseJobs(db.db, schema, release);
          summary.released += released.length;
          summary.leaseLost += release.length - released.length;
          logger.info('released', { invocationId, jobIds: released });
        }

        const eligible = [...kinds.values()].filter(fits);
        const mayClaim =
          eligible.length > 0 &&
          waiting.length === 0 &&
          inflight.size < concurrency &&
          !(queueLooksEmpty && inflight.size > 0) &&
          (drain || claimRounds === 0);
        if (mayClaim) {
          claimRounds++;
          // The buffered outcomes ride along: one statement settles them and claims the next batch.
          const batch = buffer;
          buffer = [];
          cancelFlushTimer?.();
          claimedAt = clock.now();
          // Claim only what can start now, unless a local queue was asked for (batchSize >
          // concurrency): a claimed job's lease runs from the claim, not from its start.
          const limit = batchSize > concurrency ? batchSize : concurrency - inflight.size;
          const claim = await claimJobs(db.db, schema, {
            leases: eligible.map((k) => ({ kind: k.definition.kind, leaseMs: k.definition.timeoutMs + leaseGraceMs })),
            queues,
            limit,
            invocationId,
            settle: batch.map((b) => b.outcome),
          });
          account(batch, claim.settled);
          summary.claimed += claim.jobs.length;
          waiting.push(...claim.jobs);
          queueLooksEmpty = claim.jobs.length < limit;
          if (claim.jobs.length > 0) continue;
        }

        if (inflight.size === 0 && waiting.length === 0) {
          if (eligible.length === 0) summary.stoppedBecause = 'deadline';
          else if (!drain && claimRounds > 0) summary.stoppedBecause = 'batch_done';
          else summary.stoppedBecause = 'drained';
          break;
        }
        // Wait for a free slot, or for everything when no more claiming is useful now.
        if (queueLooksEmpty || eligible.length === 0 || (!drain && claimRounds > 0)) {
          await Promise.race([Promise.all(inflight.values()), woken]);
          if (queueLooksEmpty && drain && inflight.size === 0) {
            // Everything in hand is done: look once more for new work (retries that came
            // due, jobs the handlers enqueued); that claim also writes the outcomes.
            queueLooksEmpty = false;
          }
        } else {
          await Promise.race([...inflight.values(), woken]);
        }
        if (clock.now() - oldestBufferedAt >= flushIntervalMs) rearmWake();
      }
      await flush();
    } catch (err) {
      summary.stoppedBecause = 'error';
      summary.error =
        err instanceof SkiplockError
          ? err.message
          : `unexpected error in the invocation loop: ${err instanceof Error ? `${err.name}: ${scrubSecrets(err.message)}` : 'non-Error thrown'}`;
      summary.errorCode =
        err instanceof DatabaseError
          ? (err.sqlState ?? err.code)
          : err instanceof SkiplockError
            ? err.code
            : 'internal';
      logger.error('invocation_failed', { invocationId, error: summary.error });
      // Outcomes not written are not lost: their leases expire and the jobs are rescued. Still,
      // try once to write what finished (the failure may not have been the database's).
      await Promise.allSettled(inflight.values());
      await flush().catch(() => {});
      if (waiting.length > 0) {
        // Best effort: give back what never started, so it need not wait for its lease.
        const released = await releaseJobs(db.db, schema, waiting.splice(0)).catch(() => []);
        summary.released += released.length;
      }
    }
    cancelWatchdog?.();
    summary.durationMs = clock.now() - startedAt;
    logger.info('invocation', { ...summary });
    return summary;
  }

  /** Runs one job until it settles or is aborted; resolves with what to write, never rejects. */
  async function runJob(run: JobRun, kind: Kind): Promise<Buffered | 'completed_in_transaction' | 'lease_lost'> {
    const { definition, handler } = kind;
    const { job } = run;
    const startedAt = clock.now();
    const fail = (thrown: unknown): Buffered => {
      const decision = decideFailure(thrown, job.attempt);
      const base = { id: job.id, leaseToken: job.leaseToken };
      const reason = decision.error.message;
      if (decision.outcome === 'retry') {
        let delayMs: number;
        try {
          delayMs = decision.delayMs ?? definition.backoff(job.attempt, thrown);
        } catch {
          delayMs = FALLBACK_BACKOFF(job.attempt, thrown); // a custom backoff that throws
        }
        if (thrown instanceof JobAbort) {
          // The handler may still be running (it was abandoned, not stopped): the retry must not
          // start before this attempt's lease would have ended.
          delayMs = Math.max(delayMs, job.leaseExpiresAt.getTime() - Date.now());
        }
        return { job, startedAt, reason, outcome: { ...base, outcome: 'retry', delayMs, error: decision.error } };
      }
      if (decision.outcome === 'dead') {
        return {
          job,
          startedAt,
          reason,
          outcome: { ...base, outcome: 'dead', reason: decision.reason, error: decision.error },
        };
      }
      return { job, startedAt, reason, outcome: { ...base, outcome: 'cancelled', error: decision.error } };
    };

    try {
      const parsed = definition.payloadSchema.safeParse(job.payload);
      if (!parsed.success) {
        return fail(
          new DiscardError(`stored payload does not match the ${job.kind} schema: ${describeIssues(parsed.error)}`, {
            reason: 'validation_error',
          }),
        );
      }
      const holder = { id: job.id, leaseToken: job.leaseToken };
      const work: Promise<'done' | 'completed_in_transaction' | 'lease_lost'> = definition.transactional
        ? db.db
            .transaction(async (tx) => {
              // The handler's context, plus the transaction (getters and methods come from the run).
              await handler(parsed.data, Object.assign(Object.create(run) as JobRun, { tx }));
              if (run.aborted) throw run.aborted;
              const settled = await settleJobs(tx, schema, [{ ...holder, outcome: 'completed' }]);
              if (settled.length === 0) throw new JobAbort('lease_lost', 'the lease was lost before commit');
              return 'completed_in_transaction' as const;
            })
            .catch((err: unknown) => {
              if (err instanceof JobAbort && err.reason === 'lease_lost') return 'lease_lost' as const;
              throw err;
            })
        : Promise.resolve()
            .then(() => handler(parsed.data, run))
            .then(() => 'done' as const);
      work.catch(() => {}); // a handler that rejects after we stopped waiting must not crash the process
      const result = await Promise.race([work, run.whenAborted()]);
      if (result instanceof JobAbort) {
        if (result.reason === 'lease_lost') return 'lease_lost';
        return fail(result);
      }
      if (result === 'done') return { job, startedAt, outcome: { ...holder, outcome: 'completed' } };
      return result;
    } catch (thrown) {
      if (thrown instanceof JobAbort && thrown.reason === 'lease_lost') return 'lease_lost';
      return fail(thrown);
    }
  }

  return { runInvocation };
}

export { JobAbort };

const FALLBACK_BACKOFF = toBackoff(undefined);
