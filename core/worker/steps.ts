import { DiscardError, StepError, StepSuspension } from '../../base/errors.js';
import type { AnyPgDatabase } from '../../db/connect.js';
import { executorOf } from '../../db/executor-of.js';
import { queryUnderSignalLock, type WaitRow, waitStatement } from '../../db/statements/signals.js';
import {
  readSteps,
  recordStep,
  type StepRow,
  type StepWrite,
  type Suspension,
  suspendJob,
} from '../../db/statements/steps.js';
import { toBackoff } from '../backoff.js';
import { decideFailure } from '../failure.js';
import type { StepOptions } from '../jobs.js';
import { SIGNAL_LIMITS } from '../signals.js';
import { JobAbort } from './abort.js';
import type { Attempt } from './attempt.js';
import { handlerTransaction, NEEDS_DRIZZLE, statementNow, type WorkerSettings } from './settings.js';

/** The longest step name. */
export const STEP_LIMITS = { nameLength: 200 } as const;

/**
 * The durations of the steps this warm instance ran, per kind and step name (the last 50 of
 * each): their p95 tells whether a step with no timeout of its own still fits the time left.
 */
export class StepTimings {
  readonly #byStep = new Map<string, number[]>();

  record(key: string, ms: number): void {
    let list = this.#byStep.get(key);
    if (!list) {
      list = [];
      this.#byStep.set(key, list);
    }
    list.push(ms);
    if (list.length > 50) list.shift();
  }

  p95(key: string): number | undefined {
    const list = this.#byStep.get(key);
    if (!list || list.length === 0) return undefined;
    const sorted = [...list].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)];
  }
}

/** What the step runner needs from its attempt (and, through it, the invocation). */
export interface StepHost {
  readonly attempt: Attempt;
  readonly settings: WorkerSettings;
  /** When the invocation stops running attempts, on its clock. */
  readonly stopAt: number;
  /** The time the invocation had for attempts when it started. */
  readonly budgetMs: number;
  /** The job left the invocation: the attempt ends (nothing more to write). */
  suspended(why: StepSuspension['why'], runAt: Date): void;
  /** Runs a step's function in its span, when the worker traces. */
  traced<T>(step: { name: string; position: number; attempt: number }, fn: () => Promise<T>): Promise<T>;
}

/**
 * The durable steps of one attempt: which steps the job completed before (read once, on the first
 * step), which name comes at which position, and each step's run — memoized, timed, retried on its
 * own, or moved to a later invocation when it would not fit the time left.
 */
export class StepRunner {
  readonly #host: StepHost;
  #recorded: Promise<Map<string, StepRow>> | undefined = undefined;
  readonly #byPosition = new Map<number, StepRow>();
  readonly #names = new Set<string>();
  #next = 0;
  /** The lease's end as this attempt may assume it, on the invocation's clock (the claim set it earlier). */
  #leaseEnd: number;

  constructor(host: StepHost) {
    this.#host = host;
    this.#leaseEnd = host.attempt.startedAt + host.attempt.kind.definition.timeoutMs;
  }

  async run<T>(
    name: string,
    options: StepOptions & { transaction?: boolean },
    fn: (tx?: AnyPgDatabase) => T,
  ): Promise<T> {
    const { position, row } = await this.#reach(name, 'run');
    if (row?.state === 'completed') return parseResult(row.resultJson) as T;
    const { settings, attempt } = this.#host;
    const definition = attempt.kind.definition;
    if (options.transaction && !settings.db.interactiveTransactions) {
      throw new StepError(
        'step_unsupported',
        `step "${name}": a transactional step needs interactive transactions (pg or neon-ws); ${settings.db.driver} has none`,
      );
    }
    const transaction = options.transaction ? handlerTransaction(settings) : undefined;
    if (options.transaction && !transaction) {
      throw new StepError('step_unsupported', `step "${name}": a transactional step needs Drizzle: ${NEEDS_DRIZZLE}`);
    }
    const timeoutMs = positiveInt(options.timeoutMs, `step "${name}": timeoutMs`) ?? definition.timeoutMs;
    const key = `${definition.kind}\u0000${name}`;
    await this.#beforeStart(name, options.timeoutMs ?? settings.stepTimings.p95(key) ?? timeoutMs, timeoutMs);
    const attempts = (row?.attempts ?? 0) + 1;
    this.#stillRunning();
    const started = settings.clock.now();
    let resultJson: string | undefined;
    const traced = { name, position, attempt: attempts };
    try {
      if (options.transaction) {
        const inTransaction = transaction as NonNullable<typeof transaction>;
        resultJson = await this.#host.traced(traced, () =>
          inTransaction(async (tx) => {
            this.#stillRunning(); // the transaction's BEGIN took its time too
            const json = stepResult(name, await fn(tx), settings.maxResultBytes);
            const step: StepWrite = {
              name,
              position,
              type: 'run',
              state: 'completed',
              attempts,
              durationMs: settings.clock.now() - started,
            };
            if (json !== undefined) step.resultJson = json;
            if (
              !(await recordStep(executorOf(tx), settings.schema, attempt.job, step, { now: statementNow(settings) }))
            ) {
              throw lost();
            }
            return json;
          }),
        );
      } else {
        const value = await this.#host.traced(traced, () => this.#timed(name, timeoutMs, fn));
        resultJson = stepResult(name, value, settings.maxResultBytes);
      }
    } catch (thrown) {
      if (thrown instanceof JobAbort && thrown.reason === 'lease_lost') throw this.#lost();
      if (thrown instanceof StepResultError) throw thrown;
      return this.#failed(name, position, attempts, thrown, options);
    }
    const durationMs = settings.clock.now() - started;
    settings.stepTimings.record(key, durationMs);
    if (!options.transaction) {
      const step: StepWrite = { name, position, type: 'run', state: 'completed', attempts, durationMs };
      if (resultJson !== undefined) step.resultJson = resultJson;
      if (
        !(await recordStep(settings.db.executor, settings.schema, attempt.job, step, { now: statementNow(settings) }))
      ) {
        throw this.#lost();
      }
    }
    return parseResult(resultJson ?? null) as T;
  }

  /** A durable sleep: recorded with the job's release, so it happens once; done once the job runs again. */
  async sleep(name: string, until: { delayMs: number } | { wakeAt: Date }): Promise<void> {
    const { position, row } = await this.#reach(name, 'sleep');
    if (row?.state === 'completed') return;
    if ('delayMs' in until && !(Number.isFinite(until.delayMs) && until.delayMs >= 0)) {
      throw new StepError('invalid_step', `sleep "${name}": the duration must be a number of milliseconds ≥ 0`);
    }
    if ('wakeAt' in until && !(until.wakeAt instanceof Date && Number.isFinite(until.wakeAt.getTime()))) {
      throw new StepError('invalid_step', `sleep "${name}": sleepUntil needs a valid Date`);
    }
    this.#stillRunning();
    await this.#suspend(
      { ...until, step: { name, position, type: 'sleep', state: 'completed', attempts: 1 } },
      'sleeping',
    );
  }

  /**
   * A wait for a signal on `key`: the key's oldest signal not yet taken (also one sent before the
   * wait began), or, when none comes within `timeoutMs`, a timed-out result. While it waits the job
   * is back in the queue (no attempt, no function time); a signal wakes it at once.
   */
  async waitForSignal(name: string, options: { key: string; timeoutMs: number }): Promise<SignalWaitResult> {
    const { position, row } = await this.#reach(name, 'signal');
    if (row?.state === 'completed') return waitResult(row.resultJson);
    const key = options?.key;
    if (typeof key !== 'string' || key.length === 0 || key.length > SIGNAL_LIMITS.keyLength || key.includes('\u0000')) {
      throw new StepError(
        'invalid_step',
        `wait "${name}": the key must be a string of 1 to ${SIGNAL_LIMITS.keyLength} characters, without NUL`,
      );
    }
    const timeoutMs = positiveInt(options.timeoutMs, `wait "${name}": timeoutMs`);
    if (timeoutMs === undefined) throw new StepError('invalid_step', `wait "${name}": timeoutMs is required`);
    const { settings, attempt } = this.#host;
    this.#stillRunning();
    const rows = await queryUnderSignalLock<WaitRow>(
      settings.db.executor,
      settings.schema,
      key,
      waitStatement(settings.schema, attempt.job, { name, position, key, timeoutMs }, statementNow(settings)),
    );
    const decided = rows[0];
    if (!decided) throw this.#lost();
    if (decided.outcome === 'signal') return waitResult(`{"payload":${decided.payload_json ?? 'null'}}`);
    if (decided.outcome === 'timeout') return { timedOut: true };
    this.#host.suspended('waiting', new Date(Number(decided.run_at_ms)));
    throw new StepSuspension('waiting');
  }

  /** Checks a step's name and place, and returns what the job recorded for it before. */
  /**
   * Throws when the attempt has ended — timed out, its lease lost, the invocation's time up — while
   * this step waited for the database (its first step's read, a lease extension, a BEGIN): the
   * handler goes on running, abandoned, and must not start a step another holder may already have
   * run. Checked right before the step's function and before a sleep's or a wait's statement.
   */
  #stillRunning(): void {
    const { attempt } = this.#host;
    if (attempt.end) throw attempt.aborted ?? new StepSuspension('continued');
  }

  async #reach(name: string, type: StepRow['type']): Promise<{ position: number; row: StepRow | undefined }> {
    const { attempt } = this.#host;
    this.#stillRunning();
    if (attempt.kind.definition.transactional) {
      throw new StepError(
        'step_unsupported',
        `step "${name}": a transactional kind runs in one transaction and has no durable steps; use ctx.step(name, { transaction: true }, fn) in a plain kind`,
      );
    }
    if (typeof name !== 'string' || name.length === 0 || name.length > STEP_LIMITS.nameLength) {
      throw new StepError(
        'invalid_step',
        `a step's name must be a string of 1 to ${STEP_LIMITS.nameLength} characters`,
      );
    }
    if (this.#names.has(name)) {
      throw new StepError(
        'step_name_reused',
        `step "${name}" is used twice in one run; step names are unique within a job`,
      );
    }
    this.#names.add(name);
    const position = this.#next++;
    const { maxSteps } = attempt.kind.definition;
    if (position >= maxSteps) {
      throw new StepError(
        'too_many_steps',
        `step "${name}" would be step ${position + 1}; the kind allows ${maxSteps} (maxSteps)`,
      );
    }
    const recorded = await this.#load();
    const row = recorded.get(name);
    const there = this.#byPosition.get(position);
    if ((there && there.name !== name) || (row && (row.position !== position || row.type !== type))) {
      const before = there ? `"${there.name}"` : `"${name}" at step ${(row?.position ?? 0) + 1}`;
      throw new StepError(
        'step_order_changed',
        `step ${position + 1} is "${name}" (${type}), but this job recorded ${before} there when it ran before: ` +
          'the code changed under a running job. Replay it from the beginning or from a named step.',
      );
    }
    return { position, row };
  }

  /**
   * The job's recorded steps, read once per attempt, on the first step — the same statement pushes
   * the lease far enough for a step of the kind's timeout and the code after it (twice that, as
   * #beforeStart grants), so a job of short steps extends its lease here and nowhere else. Its commit
   * does not wait for the WAL flush (readStepsStatement says why losing it is safe), so the first
   * step waits for one flushed commit, its record's, as every later step does.
   */
  #load(): Promise<Map<string, StepRow>> {
    if (!this.#recorded) {
      const { settings, attempt } = this.#host;
      const startedAt = settings.clock.now();
      const grantMs = 4 * attempt.kind.definition.timeoutMs;
      const leaseMs = grantMs + settings.leaseGraceMs;
      this.#recorded = readSteps(
        settings.db.executor,
        settings.schema,
        attempt.job,
        leaseMs,
        statementNow(settings),
      ).then((rows) => {
        if (rows === null) throw this.#lost();
        this.#leaseEnd = Math.max(this.#leaseEnd, startedAt + grantMs);
        for (const row of rows) this.#byPosition.set(row.position, row);
        return new Map(rows.map((r) => [r.name, r]));
      });
    }
    return this.#recorded;
  }

  /**
   * Before a step runs: it must fit the invocation's time left (`needMs`: its timeout, or the p95 of
   * its recorded durations), else the job continues in a fresh invocation; the lease must outlast
   * it, and the attempt's own timeout moves past it.
   */
  async #beforeStart(name: string, needMs: number, timeoutMs: number): Promise<void> {
    const { settings, attempt, stopAt, budgetMs } = this.#host;
    const now = settings.clock.now();
    if (now + needMs > stopAt) {
      // A step longer than a whole invocation would be handed on forever: it ends the job instead.
      if (needMs > budgetMs) {
        throw new StepError(
          'step_too_long',
          `step "${name}" needs ${Math.round(needMs)} ms (its timeoutMs, or the p95 of its runs), more than an invocation of this function has (${Math.round(budgetMs)} ms): give the function more time or split the step`,
        );
      }
      await this.#suspend({ delayMs: 0 }, 'continued');
    }
    const gapMs = attempt.kind.definition.timeoutMs;
    attempt.extendTimeout(now + timeoutMs + gapMs);
    if (now + timeoutMs + gapMs > this.#leaseEnd) {
      // Twice what this step needs: steps that follow extend again only once that slack is used up
      // (extending before every step cost a statement per step — half a no-op step's time).
      const grantMs = 2 * (timeoutMs + gapMs);
      if (!(await attempt.extendLease(grantMs + settings.leaseGraceMs))) throw this.#lost();
      this.#leaseEnd = now + grantMs;
    }
  }

  /** `fn` under the step's timeout: past it the step fails (it may still be running: abandoned). */
  #timed<T>(name: string, timeoutMs: number, fn: () => T): Promise<Awaited<T>> {
    const { clock } = this.#host.settings;
    return new Promise<Awaited<T>>((resolve, reject) => {
      const cancel = clock.setTimer(
        () => reject(new JobAbort('timeout', `step "${name}" timed out after ${timeoutMs} ms`)),
        timeoutMs,
      );
      Promise.resolve()
        .then(fn)
        .then(
          (value) => {
            cancel();
            resolve(value as Awaited<T>);
          },
          (thrown: unknown) => {
            cancel();
            reject(thrown);
          },
        );
    });
  }

  /** A step threw: retried on its own attempts (the job's are not used), or the job ends. */
  async #failed(
    name: string,
    position: number,
    attempts: number,
    thrown: unknown,
    options: StepOptions,
  ): Promise<never> {
    const { settings, attempt } = this.#host;
    const definition = attempt.kind.definition;
    const decision = decideFailure(thrown, attempts);
    const error = { ...decision.error, step: name };
    const failedRow: StepWrite = { name, position, type: 'run', state: 'failed', attempts, error };
    const maxAttempts = positiveInt(options.maxAttempts, `step "${name}": maxAttempts`) ?? definition.maxAttempts;
    if (decision.outcome !== 'retry' || attempts >= maxAttempts) {
      await recordStep(settings.db.executor, settings.schema, attempt.job, failedRow, { now: statementNow(settings) });
      if (decision.outcome !== 'retry') throw thrown;
      throw new StepError(
        'step_failed',
        `step "${name}" failed ${attempts} times (maxAttempts ${maxAttempts}): ${error.message}`,
      );
    }
    const backoff = options.backoff === undefined ? definition.backoff : toBackoff(options.backoff);
    let delayMs: number;
    try {
      delayMs = decision.delayMs ?? backoff(attempts, thrown);
    } catch {
      delayMs = toBackoff(undefined)(attempts, thrown);
    }
    const afterLease = thrown instanceof JobAbort;
    return this.#suspend({ delayMs, afterLease, error, step: failedRow }, 'retrying');
  }

  /** The job leaves the invocation; the handler is unwound with a StepSuspension. */
  async #suspend(suspension: Suspension, why: StepSuspension['why']): Promise<never> {
    const { settings, attempt } = this.#host;
    const runAt = await suspendJob(
      settings.db.executor,
      settings.schema,
      attempt.job,
      suspension,
      statementNow(settings),
    );
    if (runAt === null) throw this.#lost();
    this.#host.suspended(why, runAt);
    throw new StepSuspension(why);
  }

  #lost(): JobAbort {
    const abort = lost();
    this.#host.attempt.abort(abort);
    return abort;
  }
}

const lost = () => new JobAbort('lease_lost', 'the lease was lost to another holder');

/** A step's result that cannot be stored: the job goes to the DLQ (running the step again would not shrink it). */
class StepResultError extends DiscardError {
  constructor(message: string) {
    super(message, { reason: 'invalid_result' });
  }
}

function stepResult(name: string, value: unknown, maxBytes: number): string | undefined {
  if (value === undefined) return undefined;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new StepResultError(`step "${name}": its result is not JSON: ${(err as Error).message}`);
  }
  if (text === undefined) return undefined;
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) {
    throw new StepResultError(
      `step "${name}": its result is ${bytes} bytes of JSON, more than maxResultBytes (${maxBytes})`,
    );
  }
  return text;
}

/** What a wait for a signal returns: the signal's payload, or that none came in time. */
export type SignalWaitResult<T = unknown> = { timedOut: false; payload: T } | { timedOut: true };

function waitResult(json: string | null): SignalWaitResult {
  const stored = (json === null ? null : JSON.parse(json)) as { payload?: unknown; timedOut?: boolean } | null;
  return stored?.timedOut ? { timedOut: true } : { timedOut: false, payload: stored?.payload ?? null };
}

function parseResult(json: string | null): unknown {
  return json === null ? undefined : JSON.parse(json);
}

function positiveInt(value: number | undefined, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isInteger(value) || value < 1) throw new StepError('invalid_step', `${what} must be a positive integer`);
  return value;
}
