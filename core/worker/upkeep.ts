import { InvocationDeadlineError } from '../../base/errors.js';
import { scrubSecrets } from '../../base/scrub-secrets.js';
import { sweepDoomed } from '../../db/statements/bury.js';
import { nextDue } from '../../db/statements/wake.js';
import { subscriptionsOf } from '../events.js';
import { RUNTIME_TICK_DEFAULTS, runRuntimeSchedules } from '../runtime-schedule-tick.js';
import { runSchedules } from '../schedules.js';
import type { Deadline } from './deadline.js';
import { type Kind, statementNow, type WorkerSettings } from './settings.js';
import type { Ledger } from './summary.js';

/**
 * What an invocation does besides running jobs: the sweep before its first claim, the schedules'
 * ticks, the report of kinds that never fit, and when its worker next has something to do. Each
 * reads the invocation's settings and deadline and writes to its ledger; the invocation decides
 * what follows (core/worker/invocation.ts).
 */
export interface Upkeep {
  readonly settings: WorkerSettings;
  readonly invocationId: string;
  readonly deadline: Deadline;
  readonly ledger: Ledger;
  /** The time the invocation had for attempts when it started. */
  readonly budgetMs: number;
  /** Kinds whose timeoutMs does not fit even the whole invocation. */
  readonly unfit: readonly Kind[];
}

/** What a failure said, for a log line: its message, scrubbed of connection strings and passwords. */
const said = (err: unknown) => scrubSecrets(String((err as Error)?.message ?? err));

/** How often a warm instance records what it serves (the stats flag queues no worker served lately). */
export const WORKER_SEEN_EVERY_MS = 60_000;

/**
 * Rows past their deadline, and rescues with no attempt left, go to the DLQ (the ledger counts them):
 * the claim never has to decide that. Resolves with whether a claim could find anything and whether a
 * run-time schedule is due.
 */
export async function sweep(upkeep: Upkeep): Promise<{ mayClaim: boolean; schedulesDue: boolean }> {
  const { settings, deadline } = upkeep;
  const { db, schema, kinds, queues, name, clock } = settings;
  // At most once a minute per warm instance, the sweep also records what this worker serves.
  const { lastAt } = settings.served;
  const seen = lastAt === undefined || clock.now() - lastAt >= WORKER_SEEN_EVERY_MS;
  if (seen) settings.served.lastAt = clock.now();
  // Its subscribers' subscriptions go with it (unchanged ones write nothing): a subscriber that is
  // deployed without `skiplock sync` still gets its events from its first invocation on.
  // Carried whether or not it is recorded this time: one statement text, one kept plan.
  const served = {
    record: seen,
    name,
    budgetMs: upkeep.budgetMs,
    unfitKinds: upkeep.unfit.map((k) => k.definition.kind),
    subscriptions: subscriptionsOf(settings.kindList.map((k) => k.definition)),
  };
  // Whether a claim could find anything, asked only where finding nothing ends the invocation
  // (drain on, no linger): an invocation with nothing to do then sends no claim.
  const probeReady = settings.drain && settings.lingerMs === 0;
  const run = (ordering: boolean) =>
    deadline.inTime(
      sweepDoomed(db.executor, schema, {
        kinds: [...kinds.keys()],
        queues,
        limit: 1000,
        now: statementNow(settings),
        probeSchedules: settings.runtimeSchedules,
        probeReady,
        served,
        ordering,
        probeOrdered: true,
      }),
    );
  // Without a job with an ordering key in sight, the sweep that leaves out their releases (cheaper
  // to plan: what a new connection pays first). When it finds one, the full sweep follows at once,
  // and this warm instance sends the full one until a sweep sees none again.
  const shape = settings.sweepShape;
  let swept = await run(shape.ordered);
  const { dead } = swept;
  if (!shape.ordered && swept.ordered) {
    shape.ordered = true;
    swept = await run(true);
    dead.push(...swept.dead);
  } else {
    shape.ordered = swept.ordered;
  }
  for (const job of dead) upkeep.ledger.buried(job);
  return { mayClaim: swept.mayClaim, schedulesDue: swept.schedulesDue };
}

/** Whether tickSchedules would run the schedules' tick now (this instance's throttle allows it). */
export function scheduleTickDue(settings: WorkerSettings): boolean {
  const { schedules, scheduleTickMs, scheduleTick, clock } = settings;
  return (
    schedules.length > 0 && (scheduleTick.lastAt === undefined || clock.now() - scheduleTick.lastAt >= scheduleTickMs)
  );
}

/** Enqueues the schedules' due occurrences; a failure is logged, and the invocation goes on. */
export async function tickSchedules(upkeep: Upkeep): Promise<void> {
  const { settings, deadline, ledger, invocationId } = upkeep;
  const { db, schema, schedules, scheduleTick, clock, logger } = settings;
  if (!scheduleTickDue(settings)) return;
  scheduleTick.lastAt = clock.now();
  try {
    const tick = await deadline.inTime(runSchedules(db, schedules, { schema, logger, now: statementNow(settings) }));
    ledger.summary.scheduled = tick.enqueued.length;
  } catch (err) {
    if (err instanceof InvocationDeadlineError) throw err;
    logger.error('schedule_tick_failed', { invocationId, error: said(err) });
  }
}

/**
 * Enqueues the run-time schedules' due occurrences (the sweep said one is due: an app with none
 * due sends nothing for them); a failure is logged, and the invocation goes on. The tick's claim
 * on them lasts no longer than this invocation's time (at least 1 s, at most the tick's 30 s): a
 * tick killed or refused between its claim and its fire leaves them to the next invocation, not
 * for half a minute. A claim that lapses early costs nothing: the fire is fenced on each
 * schedule's version, so two ticks never both enqueue an occurrence.
 */
export async function tickRuntimeSchedules(upkeep: Upkeep): Promise<void> {
  const { settings, deadline, ledger, invocationId } = upkeep;
  const { db, schema, logger, clock } = settings;
  const leaseMs = Math.min(RUNTIME_TICK_DEFAULTS.leaseMs, Math.max(1_000, deadline.at - clock.now()));
  try {
    const tick = await deadline.inTime(
      runRuntimeSchedules(db, { schema, logger, now: statementNow(settings), leaseMs }),
    );
    ledger.summary.runtimeScheduled = tick.enqueued.length;
  } catch (err) {
    if (err instanceof InvocationDeadlineError) throw err;
    logger.error('schedule_tick_failed', {
      invocationId,
      source: 'runtime',
      error: said(err),
    });
  }
}

/**
 * With `nextDue`, an invocation that claimed nothing and ran dry reads when its worker next has
 * something to do: the earliest of a queued job's run_at, a running job's lease (a rescue if its
 * invocation died) and the schedules' next occurrences. A failure leaves nextDueAt unset (the
 * platform keeps its usual tick) and is only logged: nothing was left undone.
 */
export async function readNextDue(upkeep: Upkeep): Promise<void> {
  const { settings, deadline, invocationId } = upkeep;
  const summary = upkeep.ledger.summary;
  const { db, schema, kinds, queues, schedules, scheduleTickMs, nextDue: asked, logger } = settings;
  if (!asked || summary.claimed > 0 || summary.stoppedBecause !== 'drained') return;
  try {
    const due = await deadline.inTime(nextDue(db.executor, schema, { kinds: [...kinds.keys()], queues }));
    const times = [due.jobAt?.getTime(), due.leaseAt?.getTime(), due.scheduleAt?.getTime()];
    // The schedules' next occurrence after this invocation's tick; when the instance's throttle
    // skipped it, after the last one it may have skipped (an occurrence in between is due now).
    const now = (statementNow(settings) ?? new Date()).getTime();
    const since = new Date(summary.scheduled === undefined ? now - scheduleTickMs : now);
    for (const schedule of schedules) times.push(schedule.next(since)?.getTime());
    const known = times.filter((t): t is number => t !== undefined);
    summary.nextDueAt = known.length > 0 ? Math.min(...known) : null;
  } catch (err) {
    logger.warn('next_due_unknown', { invocationId, error: said(err) });
  }
}

/**
 * Kinds whose timeout does not fit even this whole invocation are never claimed by it: the summary
 * names them, and a log line says so once per warm instance — an error when the worker can run
 * nothing it is there for (`noOwnKindFits`, or no kind at all), a warning otherwise — but not for a
 * kind of one of the worker's `slowQueues`. The `workers` row records them all for the stats (see sweep).
 */
export function reportUnfitKinds(upkeep: Upkeep, noOwnKindFits: boolean): void {
  const { settings, unfit: kinds } = upkeep;
  if (kinds.length === 0) return;
  const { kindList, unfitWarned, logger } = settings;
  const unfit = {
    budgetMs: Math.round(upkeep.budgetMs),
    kinds: kinds.map((k) => ({ kind: k.definition.kind, timeoutMs: k.definition.timeoutMs })),
  };
  upkeep.ledger.summary.unfit = unfit;
  // unfitWarned also holds the kinds of the worker's slowQueues: another worker runs them.
  const unwarned = kinds.filter((k) => !unfitWarned.has(k.definition.kind));
  if (unwarned.length === 0) return;
  for (const k of unwarned) unfitWarned.add(k.definition.kind);
  const log = kinds.length === kindList.length || noOwnKindFits ? logger.error : logger.warn;
  log.call(logger, 'kinds_never_fit', {
    invocationId: upkeep.invocationId,
    ...unfit,
    hint: "a kind runs only when its timeoutMs fits the time the invocation has left as it starts, less safetyMarginMs: raise the function timeout or lower the kind's timeoutMs",
  });
}
