import { randomUUID } from 'node:crypto';
import { ConfigError, DatabaseError, DiscardError, InvocationDeadlineError, SkiplockError } from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { Completion, Outcome, SettleReport } from '../base/outcomes.js';
import type { ClaimedJob } from '../base/rows.js';
import type { SkiplockDb } from '../db/connect.js';
import { scrubSecrets } from '../db/execute.js';
import { buryDoomed, claimJobs } from '../db/statements/claim.js';
import { extendLease, releaseJobs, reportProgress, settleJobs, settleOutcomes } from '../db/statements/settle.js';
import { toBackoff } from './backoff.js';
import { type Clock, systemClock } from './clock.js';
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
  /**
   * What completing a job does to its row. `keep`: it stays (state completed) until retention
   * prunes it, for `jobs show` and per-job history. `delete`: it is deleted as the job completes
   * — the least work and WAL per job, as graphile-worker does; the stats count completions per
   * minute instead. Jobs holding a `window` dedupe key are kept either way.
   * @defaultValue 'keep'
   */
  completedJobs?: Completion;
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
  completedJobs: 'keep',
} as const;

/**
 * Up to this many outcomes ride along with the next claim, in one statement. A larger batch is
 * written by a statement of its own first. A statement sees the queue as it was when it began,
 * so a claim that runs after a long settle meets rows that other workers claimed meanwhile and
 * must re-check each one (auto_explain at 16 invocations, batches of 500: 2,637 index entries
 * visited per claim after a settle in the same statement, 1,539 in a statement of its own;
 * 15–20% more jobs/s at batch 500). For small batches the round trip saved weighs more.
 */
const RIDE_ALONG_MAX = 128;

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
  const completion = options.completedJobs ?? WORKER_DEFAULTS.completedJobs;
  if (completion !== 'keep' && completion !== 'delete')
    throw new ConfigError("completedJobs must be 'keep' or 'delete'");
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
    // Every statement is waited for until just before the deadline, not for its statement or query
    // timeout (seconds): the function must return, with its summary, before the platform kills it.
    const answerBy = deadlineAt - Math.min(100, safetyMarginMs);
    const inTime = <T>(statement: Promise<T>): Promise<T> =>
      new Promise<T>((resolve, reject) => {
        const cancel = clock.setTimer(() => reject(new InvocationDeadlineError()), answerBy - clock.now());
        statement.then(
          (value) => {
            cancel();
            resolve(value);
          },
          (error: unknown) => {
            cancel();
            reject(error);
          },
        );
      });
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
    let inflight = 0; // attempts started and not yet finished
    let buffer: Buffered[] = [];
    // Set by the flush timer: the oldest buffered outcome has waited flushIntervalMs. (A flag, not
    // a comparison of clocks: a timer may fire a fraction of a millisecond "early" by performance.now().)
    let flushDue = false;
    let claimRounds = 0;
    let claimedAt = startedAt;
    let queueLooksEmpty = false;

    const fits = (kind: Kind) => clock.now() + kind.definition.timeoutMs <= stopClaimingAt;

    /** Counts and logs what the database did with a batch of outcomes. */
    const account = (batch: Buffered[], report: SettleReport) => {
      if (!infoLogs && report.lost.size === 0 && report.changed.size === 0) {
        summary.completed += batch.length; // every one completed, and nobody wants a line per job
        return;
      }
      for (const item of batch) {
        const id = item.job.id;
        if (report.lost.has(id)) {
          summary.leaseLost++;
          logger.warn('lease_lost', {
            ...jobFields(item.job, invocationId),
            outcome: 'lease_lost',
            durationMs: clock.now() - item.startedAt,
          });
          continue;
        }
        const result = report.changed.get(id);
        const state = result?.state ?? 'completed';
        if (state === 'completed') summary.completed++;
        else if (state === 'queued') summary.retried++;
        else if (state === 'dead') summary.dead++;
        else summary.cancelled++;
        if (state === 'completed' && !infoLogs) continue;
        const outcome = state === 'queued' ? 'retry' : state;
        const log = outcome === 'completed' ? logger.info : logger.warn;
        log.call(logger, 'job', {
          ...jobFields(item.job, invocationId),
          outcome,
          durationMs: clock.now() - item.startedAt,
          ...(result?.state === 'queued' ? { nextRunAt: result.runAt.toISOString() } : {}),
          ...(result?.deadReason ? { reason: result.deadReason } : {}),
          ...(item.reason && state !== 'completed' ? { error: item.reason } : {}),
        });
      }
    };

    const flush = async () => {
      if (buffer.length === 0) return;
      const batch = buffer;
      buffer = [];
      cancelFlushTimer?.();
      let report: SettleReport;
      try {
        report = await inTime(
          settleOutcomes(
            db.db,
            schema,
            batch.map((b) => b.outcome),
            undefined,
            completion,
          ),
        );
      } catch (err) {
        buffer = batch.concat(buffer); // not written: the error path's final flush tries again
        throw err;
      }
      account(batch, report);
    };

    // The loop sleeps until something changes: an attempt finished, or buffered outcomes have
    // waited flushIntervalMs (outcomes must not wait behind slow jobs). One signal for both; a
    // change that happens while the loop is busy is remembered, so no wake-up is lost.
    let signal: (() => void) | undefined;
    let changedMeanwhile = false;
    const notify = () => {
      const resolve = signal;
      signal = undefined;
      if (resolve) resolve();
      else changedMeanwhile = true;
    };
    const nextChange = (): Promise<void> | undefined => {
      if (changedMeanwhile) {
        changedMeanwhile = false;
        return undefined;
      }
      return new Promise<void>((resolve) => {
        signal = resolve;
      });
    };
    let cancelFlushTimer: (() => void) | undefined;
    const record = (item: Buffered) => {
      if (buffer.length === 0) {
        flushDue = false;
        cancelFlushTimer?.();
        cancelFlushTimer = clock.setTimer(() => {
          flushDue = true;
          notify();
        }, flushIntervalMs);
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

    const finish = (run: JobRun, result: RunResult) => {
      running.delete(run);
      inflight--;
      if (result === 'completed_in_transaction') {
        summary.completed++;
        if (infoLogs) logger.info('job', { ...jobFields(run.job, invocationId), outcome: 'completed' });
      } else if (result === 'lease_lost') {
        summary.leaseLost++;
        logger.warn('lease_lost', { ...jobFields(run.job, invocationId), outcome: 'lease_lost' });
      } else {
        record(result);
      }
      notify();
    };

    const start = (job: ClaimedJob) => {
      const kind = kinds.get(job.kind) as Kind;
      const run = new JobRun(job, clock.now() + kind.definition.timeoutMs, runDeps);
      running.add(run);
      inflight++;
      armWatchdog(Math.min(run.timeoutAt, stopClaimingAt));
      runJob(run, kind, (result) => finish(run, result));
    };

    try {
      // First, the rows no claim may run (past their deadline, rescues with no attempt left)
      // go to the DLQ; the claim statement stays lean because it never has to decide that.
      for (const job of await inTime(buryDoomed(db.db, schema, { kinds: [...kinds.keys()], queues, limit: 1000 }))) {
        summary.dead++;
        logger.warn('job', { ...jobFields(job, invocationId), outcome: 'dead', reason: job.reason });
      }
      while (true) {
        // Outcomes normally ride along with the next claim; they are written on their own only
        // when they have waited flushIntervalMs, pile up while a claimed batch is still being
        // worked through, or are too many to ride along (RIDE_ALONG_MAX).
        const shouldFlush = buffer.length > 0 && (flushDue || (waiting.length > 0 && buffer.length >= concurrency));
        if (shouldFlush) await flush();

        // Start waiting jobs while slots are free; give back the ones that no longer fit.
        const release: ClaimedJob[] = [];
        let taken = 0;
        while (inflight < concurrency && taken < waiting.length) {
          const job = waiting[taken++] as ClaimedJob;
          const kind = kinds.get(job.kind) as Kind;
          // Its lease started at the claim: a job that waited locally too long to finish inside
          // it is given back rather than started (someone else could rescue it mid-run).
          const leaseLeft = claimedAt + kind.definition.timeoutMs + leaseGraceMs - clock.now();
          if (fits(kind) && leaseLeft >= kind.definition.timeoutMs) start(job);
          else release.push(job);
        }
        waiting.splice(0, taken); // once, not a shift() per job
        if (waiting.length > 0 && !Array.from(kinds.values()).some(fits)) release.push(...waiting.splice(0));
        if (release.length > 0) {
          const released = await inTime(releaseJobs(db.db, schema, release));
          summary.released += released.length;
          summary.leaseLost += release.length - released.length;
          logger.info('released', { invocationId, jobIds: released });
        }

        const eligible = [...kinds.values()].filter(fits);
        const mayClaim =
          eligible.length > 0 &&
          waiting.length === 0 &&
          inflight < concurrency &&
          !(queueLooksEmpty && inflight > 0) &&
          (drain || claimRounds === 0);
        if (mayClaim) {
          claimRounds++;
          // Too many to ride along: settled by a statement of their own, which runs alongside the
          // claim when the pool has a second connection (flush() takes the buffer at once).
          const settling = buffer.length > RIDE_ALONG_MAX ? flush() : undefined;
          // The buffered outcomes ride along: one statement settles them and claims the next batch.
          const batch = buffer;
          buffer = [];
          cancelFlushTimer?.();
          claimedAt = clock.now();
          // Claim only what can start now, unless a local queue was asked for (batchSize >
          // concurrency): a claimed job's lease runs from the claim, not from its start.
          const limit = batchSize > concurrency ? batchSize : Math.min(batchSize, concurrency - inflight);
          const [settled, claimed] = await Promise.allSettled([
            settling,
            inTime(
              claimJobs(db.db, schema, {
                leases: eligible.map((k) => ({
                  kind: k.definition.kind,
                  leaseMs: k.definition.timeoutMs + leaseGraceMs,
                })),
                queues,
                limit,
                invocationId,
                settle: batch.map((b) => b.outcome),
                completion,
              }),
            ),
          ]);
          // Jobs claimed are taken in even if the settle beside the claim failed: the error path
          // then gives them back instead of leaving them to their leases.
          if (claimed.status === 'fulfilled') {
            account(batch, claimed.value.settled);
            summary.claimed += claimed.value.jobs.length;
            waiting.push(...claimed.value.jobs);
          }
          // The claim's outcomes were not written: back into the buffer for the final flush.
          else buffer = batch.concat(buffer);
          if (settled.status === 'rejected') throw settled.reason;
          if (claimed.status === 'rejected') throw claimed.reason;
          queueLooksEmpty = claimed.value.jobs.length < limit;
          if (claimed.value.jobs.length > 0) continue;
        }

        if (inflight === 0 && waiting.length === 0) {
          if (eligible.length === 0) summary.stoppedBecause = 'deadline';
          else if (!drain && claimRounds > 0) summary.stoppedBecause = 'batch_done';
          else summary.stoppedBecause = 'drained';
          break;
        }
        // Wait for a free slot (or, when no more claiming is useful now, for the rest to finish).
        await nextChange();
        if (queueLooksEmpty && drain && inflight === 0) {
          // Everything in hand is done: look once more for new work (retries that came
          // due, jobs the handlers enqueued); that claim also writes the outcomes.
          queueLooksEmpty = false;
        }
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
      // try once to write what finished (the failure may not have been the database's) — unless
      // the deadline is what stopped us.
      if (!(err instanceof InvocationDeadlineError)) {
        while (inflight > 0) await nextChange();
        await flush().catch(() => {});
        if (waiting.length > 0) {
          // Best effort: give back what never started, so it need not wait for its lease.
          const released = await inTime(releaseJobs(db.db, schema, waiting.splice(0))).catch(() => []);
          summary.released += released.length;
        }
      }
    }
    cancelWatchdog?.();
    summary.durationMs = clock.now() - startedAt;
    logger.info('invocation', { ...summary });
    return summary;
  }

  /** What to write for a failed attempt. */
  function failed(run: JobRun, definition: Kind['definition'], startedAt: number, thrown: unknown): Buffered {
    const { job } = run;
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
      // An aborted handler may still be running (it was abandoned, not stopped): its retry must not
      // start before this attempt's lease ends — decided by the database, whose clock the lease is on.
      const afterLease = thrown instanceof JobAbort;
      return {
        job,
        startedAt,
        reason,
        outcome: { ...base, outcome: 'retry', delayMs, afterLease, error: decision.error },
      };
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
  }

  /** An attempt that ended by throwing (or by its signal): lost lease, or a failure to write. */
  function ended(run: JobRun, definition: Kind['definition'], startedAt: number, thrown: unknown): RunResult {
    if (thrown instanceof JobAbort && thrown.reason === 'lease_lost') return 'lease_lost';
    return failed(run, definition, startedAt, thrown);
  }

  /**
   * Runs one attempt until it settles or is aborted and reports what to write — once, and always
   * from a microtask, so the loop's bookkeeping never changes under its feet. No promise of our
   * own per attempt: the handler's promise and the abort race through a callback.
   */
  function runJob(run: JobRun, kind: Kind, report: (result: RunResult) => void): void {
    const { definition, handler } = kind;
    const { job } = run;
    const startedAt = clock.now();
    let reported = false;
    const reportOnce = (result: () => RunResult) => {
      if (reported) return;
      reported = true;
      report(result());
    };
    const later = (result: () => RunResult) => queueMicrotask(() => reportOnce(result));
    const parsed = definition.payloadSchema.safeParse(job.payload);
    if (!parsed.success) {
      const error = new DiscardError(
        `stored payload does not match the ${job.kind} schema: ${describeIssues(parsed.error)}`,
        { reason: 'validation_error' },
      );
      later(() => failed(run, definition, startedAt, error));
      return;
    }
    if (definition.transactional) {
      runInTransaction(run, kind, parsed.data, startedAt).then((result) => reportOnce(() => result));
      return;
    }
    let returned: unknown;
    try {
      returned = handler(parsed.data, run);
    } catch (thrown) {
      later(() => ended(run, definition, startedAt, thrown));
      return;
    }
    const completed = (): RunResult => {
      if (run.aborted) return ended(run, definition, startedAt, run.aborted);
      return { job, startedAt, outcome: { id: job.id, leaseToken: job.leaseToken, outcome: 'completed' } };
    };
    if (!isThenable(returned)) {
      later(completed);
      return;
    }
    run._onAbort((reason) => later(() => ended(run, definition, startedAt, reason)));
    // Both callbacks attached: a handler that rejects after we stopped waiting cannot crash the process.
    Promise.resolve(returned).then(
      () => reportOnce(completed),
      (thrown: unknown) => reportOnce(() => ended(run, definition, startedAt, thrown)),
    );
  }

  /** The opt-in transactional mode: the handler's writes commit with the job's completion. */
  async function runInTransaction(run: JobRun, kind: Kind, payload: unknown, startedAt: number): Promise<RunResult> {
    const { definition, handler } = kind;
    const holder = { id: run.job.id, leaseToken: run.job.leaseToken };
    const work = db.db
      .transaction(async (tx) => {
        // The handler's context, plus the transaction (getters and methods come from the run).
        await handler(payload, Object.assign(Object.create(run) as JobRun, { tx }));
        if (run.aborted) throw run.aborted;
        const settled = await settleJobs(tx, schema, [{ ...holder, outcome: 'completed' }], undefined, completion);
        if (settled.length === 0) throw new JobAbort('lease_lost', 'the lease was lost before commit');
        return 'completed_in_transaction' as const;
      })
      .catch((thrown: unknown) => ended(run, definition, startedAt, thrown));
    return new Promise<RunResult>((resolve) => {
      run._onAbort((reason) => resolve(ended(run, definition, startedAt, reason)));
      work.then(resolve);
    });
  }

  return { runInvocation };
}

export { JobAbort };

type RunResult = Buffered | 'completed_in_transaction' | 'lease_lost';

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

const FALLBACK_BACKOFF = toBackoff(undefined);
