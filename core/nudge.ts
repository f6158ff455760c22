import type { InvocationStarter } from '../base/starter.js';
import { type Clock, systemClock } from './clock.js';
import { type Logger, silentLogger } from './logger.js';

/**
 * Starts a worker for some queues right after their jobs committed, instead of waiting for the
 * next cron tick. Never rejects: a nudge that fails is logged, and the tick runs the jobs later.
 */
export interface Nudger {
  nudge(queues: Iterable<string>): Promise<void>;
  /**
   * Told of every write through the enqueuer, nudged or not — in a caller's transaction, before its
   * commit — with when each job is due (`at`: null for at once). A platform whose idle workers leave
   * the database alone learns from it that something is due (docs/cost.md). Never rejects.
   */
  noteDue?(due: readonly DueWrite[]): Promise<void>;
}

/** A job written to `queue`, due at `at` (null: at once). */
export interface DueWrite {
  queue: string;
  at: Date | null;
}

export interface NudgerOptions {
  /** The worker that runs a queue (e.g. an async Invoke of its function); undefined: not nudged. */
  workerFor(queue: string): InvocationStarter | undefined;
  /**
   * At most one start per worker this often, per process: a burst of enqueues yields one start
   * at once and, if more came meanwhile, one more when the window ends (so a job committed just
   * after the started worker looked at its queue still starts soon). Across processes the
   * workers' cap (maxInvocations) returns surplus invocations at once. @defaultValue 1000
   */
  coalesceMs?: number;
  /**
   * How long a nudge waits for a start before it lets go (logged as nudge_failed; the start goes on
   * unwatched): a nudge never holds an enqueue's answer longer. @defaultValue 2000
   */
  startTimeoutMs?: number;
  /** @defaultValue silentLogger */
  logger?: Logger;
  /** @defaultValue the system clock */
  clock?: Clock;
}

export const NUDGE_DEFAULTS = { coalesceMs: 1_000, startTimeoutMs: 2_000 } as const;

interface TargetState {
  lastStart: number;
  trailing: boolean;
}

/** A nudger that coalesces starts per worker (see NudgerOptions.coalesceMs). */
export function createNudger(options: NudgerOptions): Nudger {
  const coalesceMs = options.coalesceMs ?? NUDGE_DEFAULTS.coalesceMs;
  const logger = options.logger ?? silentLogger;
  const clock = options.clock ?? systemClock;
  const states = new Map<InvocationStarter, TargetState>();

  const startTimeoutMs = options.startTimeoutMs ?? NUDGE_DEFAULTS.startTimeoutMs;
  const start = (worker: InvocationStarter) =>
    new Promise<void>((resolve) => {
      // Never longer than startTimeoutMs: a target that accepts and never answers must not hold the
      // enqueue's answer (the job is committed; the tick runs it if the start never lands).
      const cancel = clock.setTimer(() => {
        logger.warn('nudge_failed', { error: `the start did not answer within ${startTimeoutMs} ms` });
        resolve();
      }, startTimeoutMs);
      worker.start(1).then(
        () => {
          cancel();
          resolve();
        },
        (err: unknown) => {
          cancel();
          logger.warn('nudge_failed', { error: describeError(err) });
          resolve();
        },
      );
    });

  return {
    async nudge(queues) {
      const workers = new Set<InvocationStarter>();
      for (const queue of queues) {
        const worker = options.workerFor(queue);
        if (worker) workers.add(worker);
      }
      const starts: Promise<void>[] = [];
      for (const worker of workers) {
        const state = states.get(worker);
        const now = clock.now();
        if (!state || now - state.lastStart >= coalesceMs) {
          states.set(worker, { lastStart: now, trailing: false });
          starts.push(start(worker));
        } else if (!state.trailing) {
          // One more start when the window ends, for what was enqueued meanwhile.
          state.trailing = true;
          clock.setTimer(
            () => {
              state.trailing = false;
              state.lastStart = clock.now();
              void start(worker);
            },
            state.lastStart + coalesceMs - now,
          );
        }
      }
      await Promise.all(starts);
    },
  };
}

/** An error's name, message and causes (an SDK's or fetch's own message alone often says nothing). */
export function describeError(err: unknown, depth = 0): string {
  if (!(err instanceof Error)) return typeof err === 'string' ? err : 'non-Error thrown';
  const code = (err as { code?: unknown }).code;
  const head = `${err.name}: ${err.message || '(no message)'}${typeof code === 'string' ? ` [${code}]` : ''}`;
  const cause = (err as { cause?: unknown }).cause;
  return cause !== undefined && depth < 3 ? `${head}; cause: ${describeError(cause, depth + 1)}` : head;
}
