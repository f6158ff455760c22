import { randomUUID } from 'node:crypto';
import { InvocationDeadlineError, OutcomeUnknownError } from '../../base/errors.js';
import type { ClaimedJob } from '../../base/rows.js';
import { type ClaimResult, claimJobs } from '../../db/statements/claim.js';
import { releaseClaim, releaseJobs } from '../../db/statements/settle.js';
import type { Tracing } from '../tracing.js';
import { Admission } from './admission.js';
import { Attempt, type AttemptHost } from './attempt.js';
import { BatchRun } from './batch.js';
import { afterPendingWork, ClaimAhead } from './claim-ahead.js';
import { Deadline, Watchdog } from './deadline.js';
import { OutcomeBuffer, outcomesOf, RIDE_ALONG_MAX } from './outcome-buffer.js';
import { type Kind, statementNow, type WorkerSettings } from './settings.js';
import { type InvocationInput, type InvocationSummary, Ledger } from './summary.js';
import {
  readNextDue,
  reportUnfitKinds,
  scheduleTickDue,
  sweep,
  tickRuntimeSchedules,
  tickSchedules,
  type Upkeep,
} from './upkeep.js';

/**
 * Where one invocation stands.
 *
 * - `sweeping`: moving the rows no claim may run to the DLQ (buryDoomed), before the first claim.
 *   When the same statement shows that a claim would find nothing and no schedule is due, the loop
 *   stops there (drained): it sends no claim and takes no slot, so an invocation with nothing to do
 *   sends this one statement.
 * - `admitting`: with maxInvocations, taking one of the worker's slots; none free → `stopped`
 *   at once (saturated: enough invocations run already). Then the schedules' tick; when a claim
 *   would still find nothing, the loop stops (drained).
 * - `unfit`: no kind's timeoutMs fits even the whole invocation: nothing is claimed, and the loop
 *   stops (no_kind_fits) rather than wait for its deadline.
 * - `running`: attempts run; when slots are free (or about to be: see ClaimAhead) and nothing waits
 *   locally, the loop claims.
 * - `claiming`: a claim statement is out; the buffered outcomes ride along with it.
 * - `draining`: the last claim found fewer jobs than it asked for. No claim until everything in
 *   hand is done, then one more look (retries that came due, jobs the handlers enqueued).
 * - `pacing`: a rate limit held work back and its next token comes within rateWaitMs: the outcomes
 *   are written, and the loop looks again when the token comes back (once more without progress
 *   at most: a rate whose queue has nothing left must not keep it waiting).
 * - `lingering`: (with lingerMs) the queue ran dry: the outcomes are written, and after
 *   lingerPollMs the loop looks again, until lingerMs have passed with nothing found.
 * - `filling`: a batch kind's jobs came fewer than its `batch.size` and it has a `maxWaitMs`: the
 *   loop claims again for that kind alone, until the batch is full or the wait is over (never past
 *   the budget, nor the first jobs' lease grace), then starts it and goes back where it was.
 * - `finishing`: drain is off and the one batch is claimed: it runs to its end, then the loop stops.
 * - `deadline`: no kind fits the time left. What runs finishes, or the watchdog aborts it; what
 *   waits locally is released; then the loop stops.
 * - `settling`: nothing in hand: the last outcomes are written.
 * - `failing`: a statement failed. Wait for the attempts, write what finished, release what
 *   never started (none of it when the deadline is what failed).
 * - `stopped`: the summary is returned.
 */
export type InvocationState =
  | 'admitting'
  | 'sweeping'
  | 'unfit'
  | 'running'
  | 'claiming'
  | 'draining'
  | 'pacing'
  | 'lingering'
  | 'filling'
  | 'finishing'
  | 'deadline'
  | 'settling'
  | 'failing'
  | 'stopped';

const NEXT: { readonly [S in InvocationState]: readonly InvocationState[] } = {
  sweeping: ['admitting', 'running', 'unfit', 'settling', 'failing'],
  admitting: ['running', 'unfit', 'settling', 'stopped', 'failing'],
  unfit: ['settling', 'failing'],
  running: ['claiming', 'filling', 'deadline', 'failing'],
  claiming: ['running', 'draining', 'finishing', 'failing'],
  draining: ['running', 'filling', 'pacing', 'lingering', 'deadline', 'settling', 'failing'],
  pacing: ['running', 'deadline', 'failing'],
  lingering: ['running', 'deadline', 'failing'],
  filling: ['running', 'draining', 'finishing', 'failing'],
  finishing: ['filling', 'deadline', 'settling', 'failing'],
  deadline: ['settling', 'failing'],
  settling: ['stopped', 'failing'],
  failing: ['stopped'],
  stopped: [],
};

/** Why the loop stopped, by the state it stopped from. */
const STOPPED_BECAUSE = {
  sweeping: 'drained',
  admitting: 'drained',
  draining: 'drained',
  finishing: 'batch_done',
  deadline: 'deadline',
  unfit: 'no_kind_fits',
} as const satisfies Partial<Record<InvocationState, InvocationSummary['stoppedBecause']>>;

/**
 * One invocation of the worker: claims batches while time allows, runs up to `concurrency`
 * attempts at once, writes their outcomes in batches, and returns its summary before the deadline.
 * The parts: Deadline and Watchdog (time), Attempt (one handler run), OutcomeBuffer (outcomes not
 * yet written), Ledger (the summary and the log lines), upkeep.ts (the sweep, the schedules' ticks,
 * the next due time). This class only moves between states.
 */
export class Invocation implements AttemptHost {
  readonly settings: WorkerSettings;
  readonly invocationId: string;
  #state: InvocationState;
  /** The cap on running invocations and fan-out (with maxInvocations). */
  readonly #admission: Admission | undefined;
  /** Claims made so far (the lane of the next one follows from it). */
  #claims = 0;
  /** Since when claims have found nothing (lingering counts from there). */
  #drySince: number | undefined;
  #lingerLogged = false;
  /** When the last claim said a rate's next token comes back (ms from then), and when it was sent. */
  #nextStart: { inMs: number; claimedAt: number } | undefined;
  /** The last claim came right after a wait for a rate and found nothing. */
  #pacedInVain = false;
  #pacing = false;
  /** Since when a slot has been free without a claim to fill it (see #mayRefill), and its timer's cancel. */
  #freeSince: number | undefined;
  #cancelFreeTimer: (() => void) | undefined;
  /** The claims' round trip and the kinds' durations: how many slots a claim sent now may count as free. */
  readonly #ahead = new ClaimAhead();
  /** When the loop looks again because an attempt comes within a round trip of its end, and its timer. */
  #aheadWake: { at: number; cancel: () => void } | undefined;
  /** Attempts that ended, and when the first claim went out: this invocation's rate. */
  #finished = 0;
  #firstClaimAt: number | undefined;
  readonly #deadline: Deadline;
  readonly #watchdog: Watchdog;
  readonly #ledger: Ledger;
  readonly #buffer: OutcomeBuffer;
  /** What the sweep, the schedules' ticks and the next-due read work with (upkeep.ts). */
  readonly #upkeep: Upkeep;
  /** The lease token of a claim whose answer was lost: what it took is given back on the way out. */
  #lostClaim: string | undefined;
  /** Claimed and not started yet (a local queue, when batchSize > concurrency). */
  readonly #waiting: ClaimedJob[] = [];
  /** Attempts (and batches: one each) started and not yet delivered. */
  #inflight = 0;
  /** A batch set aside to fill (#fill), with until when it may wait. */
  #filling: Filling | undefined;
  /** Kinds whose timeoutMs does not fit even the whole invocation: never claimed by it. */
  readonly #unfit: readonly Kind[];
  /** Every kind of the worker's own queues never fits this invocation (see the constructor). */
  readonly #noOwnKindFits: boolean;
  /** Kinds whose jobs went on to a later invocation because their next step did not fit. */
  readonly #continuedKinds = new Set<string>();
  /** When the last claim was sent: the leases of the jobs waiting locally run from there. */
  #claimedAt: number;
  readonly #startedAt: number;
  /** Attempts that ended, delivered together from one microtask. */
  #ended: Attempt[] = [];
  // The loop sleeps until something changes: an attempt ended, or buffered outcomes have waited
  // flushIntervalMs (outcomes must not wait behind slow jobs). One signal for both; a change that
  // happens while the loop is busy is remembered, so no wake-up is lost.
  #wake: (() => void) | undefined = undefined;
  #changedMeanwhile = false;

  constructor(settings: WorkerSettings, input: InvocationInput) {
    this.settings = settings;
    this.invocationId = input.invocationId ?? randomUUID();
    this.#ledger = new Ledger(settings, this.invocationId);
    this.#deadline = new Deadline(settings.clock, input.remainingMs, settings.safetyMarginMs);
    this.#watchdog = new Watchdog(settings.clock, this.#deadline);
    this.#buffer = new OutcomeBuffer(settings, this.#deadline, this.#ledger, this.#notify);
    this.#claimedAt = settings.clock.now();
    this.#startedAt = this.#claimedAt;
    this.#unfit = settings.kindList.filter((k) => !this.#deadline.fitsAtAll(k, this.#startedAt));
    // The kinds whose own queue this worker serves: when none of them fits, it can run nothing it is
    // there for (a kind of another queue runs here only for a job enqueued to this one by hand).
    const queues = settings.queues;
    const own = queues ? settings.kindList.filter((k) => queues.includes(k.definition.queue)) : settings.kindList;
    this.#noOwnKindFits = own.length > 0 && own.every((k) => this.#unfit.includes(k));
    this.#admission =
      settings.maxInvocations === undefined
        ? undefined
        : new Admission(settings, settings.maxInvocations, this.invocationId, this.#deadline);
    this.#upkeep = {
      settings,
      invocationId: this.invocationId,
      deadline: this.#deadline,
      ledger: this.#ledger,
      budgetMs: this.budgetMs,
      unfit: this.#unfit,
    };
    this.#state = 'sweeping';
  }

  get state(): InvocationState {
    return this.#state;
  }

  /** AttemptHost: when attempts stop running (a step that would end later waits for another invocation). */
  get stopAt(): number {
    return this.#deadline.stopClaimingAt;
  }

  /** AttemptHost: the time this invocation had for attempts when it started. */
  get budgetMs(): number {
    return this.#deadline.stopClaimingAt - this.#startedAt;
  }

  async run(): Promise<InvocationSummary> {
    reportUnfitKinds(this.#upkeep, this.#noOwnKindFits);
    try {
      if (await this.#sweep()) {
        while (this.#state !== 'settling') await this.#turn();
        await this.#buffer.flush();
        await readNextDue(this.#upkeep);
        this.#to('stopped');
      }
    } catch (err) {
      await this.#fail(err);
    }
    this.#watchdog.stop();
    this.#aheadWake?.cancel();
    this.#cancelFreeTimer?.();
    await this.#startContinuations();
    if (this.#admission) {
      await this.#admission.close();
      this.#ledger.summary.invocationsStarted = this.#admission.started;
    }
    return this.#ledger.close();
  }

  /**
   * Jobs went on to a later invocation (a continuation: the next step did not fit the time left):
   * with fan-out, one fresh invocation starts now rather than at the next tick, which still runs them
   * if the start fails.
   */
  async #startContinuations(): Promise<void> {
    const { fanOut, logger } = this.settings;
    if (!fanOut || this.#continuedKinds.size === 0) return;
    try {
      await fanOut.start(1);
    } catch (err) {
      logger.warn('continuation_start_failed', {
        invocationId: this.invocationId,
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  /** Takes a slot when invocations are counted; false (stopped, saturated) when none is free. */
  async #admit(): Promise<boolean> {
    if (!this.#admission) return true;
    this.#to('admitting');
    if (await this.#admission.register()) return true;
    this.#ledger.summary.stoppedBecause = 'saturated';
    this.#to('stopped');
    return false;
  }

  #to(next: InvocationState): void {
    if (!NEXT[this.#state].includes(next))
      throw new Error(`invocation loop: no transition from ${this.#state} to ${next}`);
    this.#state = next;
  }

  /**
   * The sweep (upkeep.ts) before anything else. With something to do, the slot (with
   * maxInvocations), then the schedules' tick when one is due in this instance. False when no slot
   * was free (stopped, saturated).
   */
  async #sweep(): Promise<boolean> {
    const { schedulesDue, mayClaim } = await sweep(this.#upkeep);
    // Nothing to claim and no schedule to tick: the registration would only be undone. The sweep goes
    // first so that such an invocation (every tick of an idle worker, the last of a drained backlog)
    // sends one statement, not three; one refused a slot has swept, which any invocation may do.
    const allUnfit = this.#unfit.length === this.settings.kindList.length;
    if (!mayClaim && !schedulesDue && !scheduleTickDue(this.settings) && !allUnfit && this.#someKindFits()) {
      this.#settle();
      return true;
    }
    if (!(await this.#admit())) return false;
    await tickSchedules(this.#upkeep);
    if (schedulesDue) await tickRuntimeSchedules(this.#upkeep);
    const { scheduled, runtimeScheduled } = this.#ledger.summary;
    if (allUnfit) this.#to('unfit');
    else if (!mayClaim && !scheduled && !runtimeScheduled && this.#someKindFits()) this.#settle();
    else this.#to('running');
    return true;
  }

  /** One turn of the loop: write what is due, start what waits, claim or stop, or wait for a change. */
  async #turn(): Promise<void> {
    if (this.#state === 'unfit') return this.#settle(); // nothing claimed, nothing to write
    const { concurrency } = this.settings;
    const buffer = this.#buffer;
    const claimFirst = this.#mayClaimBeforeStart();
    // Outcomes normally ride along with the next claim; they are written on their own only when
    // they have waited flushIntervalMs, are too many to ride along (RIDE_ALONG_MAX, in #claim), or
    // pile up while jobs of a local queue wait beyond the free slots (the next claim is a batch
    // away). Jobs claimed ahead (ClaimAhead) wait only for the slots these outcomes freed: they
    // start in this turn, and the next claim, at most a job's duration later, takes the outcomes
    // along — a settle of their own was a request per batch that also held their start for its
    // round trip (the burst over neon-http: 0.05 of its 0.18 requests per job).
    const queued = this.#waiting.length > concurrency - this.#inflight;
    if (buffer.size > 0 && (buffer.due || (!claimFirst && queued && buffer.size >= concurrency))) {
      await buffer.flush();
    }
    if (claimFirst) return this.#claimBeforeStart();
    const release = this.#startWaiting();
    if (release) await this.#release(release);
    if (this.#filling) await this.#fill();

    if (this.#state !== 'deadline' && !this.#someKindFits()) this.#to('deadline');
    if (this.#state === 'draining' && this.#inflight === 0 && this.#waiting.length === 0) this.#to('running');
    if (this.#state === 'running' && this.#waiting.length === 0 && this.#mayRefill()) {
      // Found jobs, or found none but must look again: the outcomes it wrote released children, or
      // an attempt ended while it was out (what that attempt enqueued or released is not in it).
      if ((await this.#claim()) > 0 || this.#state === 'running' || this.#buffer.size > 0) return;
    }
    if (this.#state === 'draining' && this.#inflight === 0 && this.#waiting.length === 0 && this.#mayPace()) {
      await this.#pace();
      return;
    }
    if (this.#state === 'draining' && this.#inflight === 0 && this.#waiting.length === 0 && this.#mayLinger()) {
      await this.#linger();
      return;
    }
    if (this.#inflight === 0 && this.#waiting.length === 0) return this.#settle();
    // Wait for a free slot (or, when claiming is over for now, for the rest to finish).
    await this.#nextChange();
  }

  /** Nothing in hand: the loop stops, and the state it stops from says why. */
  #settle(): void {
    const stoppedBecause = STOPPED_BECAUSE[this.#state as keyof typeof STOPPED_BECAUSE];
    this.#to('settling'); // asserts the state was one of those
    // Nothing claimed, and none of the kinds of its own queues could have been: that is why.
    const unfit = this.#noOwnKindFits && this.#ledger.summary.claimed === 0;
    this.#ledger.summary.stoppedBecause = unfit ? 'no_kind_fits' : stoppedBecause;
  }

  /**
   * Whether enough slots are free to claim. Claiming as soon as one slot frees splits the claims of a
   * backlog into the one or two slots that came free (jobs end at staggered times), so each job costs
   * a statement of its own (the serverless bench: 0.46 statements per job at concurrency 10 for
   * 100 ms jobs, and 2 connections per invocation). With nothing running it claims at once; otherwise
   * it waits until half a batch is free — but a freed slot never waits longer than flushIntervalMs
   * (the flush timer wakes the loop then), so long jobs that end one by one keep their slots busy.
   * The attempts expected to end before a claim sent now is answered count as free (ClaimAhead): over
   * a slow link the claim goes out a round trip earlier and brings their jobs too.
   */
  #mayRefill(): boolean {
    const { concurrency, batchSize, flushIntervalMs, clock } = this.settings;
    const free = concurrency - this.#inflight;
    if (this.#inflight === 0) return true;
    const half = Math.ceil(Math.min(batchSize, concurrency) / 2);
    if (free >= half) return true;
    // The attempts that end before a claim sent now is answered count as free (ClaimAhead); when
    // they do not make half a batch yet, the loop looks again as the next one comes that close.
    const soon = batchSize > concurrency ? NONE_ENDING : this.#endingSoon(half - free);
    if (free + soon.count >= half) return true;
    this.#wakeAt(soon.nextAt);
    if (free <= 0) return false;
    return this.#freeSince !== undefined && clock.now() - this.#freeSince >= flushIntervalMs;
  }

  /**
   * The running attempts expected to end before a claim sent now is answered (counted up to `enough`),
   * and when the next one comes that close. None while a kind that fits now would not fit once the
   * jobs claimed ahead start (about two round trips from now): near its end the invocation claims
   * only for the slots already free.
   */
  #endingSoon(enough = Number.POSITIVE_INFINITY): { count: number; nextAt: number } {
    const roundTripMs = this.#ahead.roundTripMs;
    if (roundTripMs === 0) return NONE_ENDING;
    for (const kind of this.settings.kindList) {
      if (this.#fits(kind) && !this.#deadline.fits(kind, 2 * roundTripMs)) return NONE_ENDING;
    }
    return this.#ahead.endingSoon(this.#watchdog.running, this.settings.clock.now(), enough);
  }

  /**
   * Whether the next claim goes out before the jobs waiting locally start (ClaimAhead.endBeforeAnswer):
   * all of them start now and end before its answer, and every kind that fits now still fits when
   * the jobs it brings start, about two round trips from now. Only while the buffered outcomes ride
   * along (one statement): on one connection a settle of its own goes first and the claim after it
   * waits for the jobs to end anyway (probe 50,000 K=1 batch 500: 0.85–0.98× of claiming after them).
   */
  #mayClaimBeforeStart(): boolean {
    const { concurrency, batchSize, kindList, kinds } = this.settings;
    const waiting = this.#waiting;
    if (this.#state !== 'running' || this.#filling || waiting.length === 0) return false;
    if (this.#buffer.size > RIDE_ALONG_MAX) return false;
    if (batchSize > concurrency || waiting.length > concurrency - this.#inflight) return false;
    const roundTripMs = this.#ahead.roundTripMs;
    for (const kind of kindList) {
      if (this.#fits(kind) && !this.#deadline.fits(kind, 2 * roundTripMs)) return false;
    }
    for (const job of waiting) if (!this.#fits(kinds.get(job.kind) as Kind)) return false;
    return this.#ahead.endBeforeAnswer(waiting, kinds);
  }

  /**
   * Sends the next claim, with the buffered outcomes, then starts the jobs waiting while it is out:
   * the database claims while they run. Their slots count as free in the claim's limit (they end
   * before its answer).
   */
  async #claimBeforeStart(): Promise<void> {
    const claimedAt = this.#claimedAt; // the waiting jobs' leases run from their own claim
    const claim = this.#claim();
    claim.catch(() => {}); // awaited below: its failure must not count as unhandled meanwhile
    await afterPendingWork(); // the claim is on its way before the jobs take the process
    const release = this.#startWaiting(claimedAt);
    await claim;
    if (release) await this.#release(release);
  }

  /** Wakes the loop at `at` (on its clock), unless a wake-up at or before it is set already. */
  #wakeAt(at: number): void {
    if (!Number.isFinite(at) || (this.#aheadWake && this.#aheadWake.at <= at)) return;
    this.#aheadWake?.cancel();
    const cancel = this.settings.clock.setTimer(() => {
      this.#aheadWake = undefined;
      this.#notify();
    }, at - this.settings.clock.now());
    this.#aheadWake = { at, cancel };
  }

  /** Whether to keep looking for work: lingerMs have not passed since claims started finding none. */
  #mayLinger(): boolean {
    const { lingerMs, clock } = this.settings;
    if (lingerMs === 0) return false;
    this.#drySince ??= clock.now();
    return clock.now() - this.#drySince < lingerMs;
  }

  /** The queue ran dry: write the outcomes (they must not wait for the linger), wait, look again. */
  async #linger(): Promise<void> {
    this.#to('lingering');
    const { clock, lingerMs, lingerPollMs } = this.settings;
    await this.#buffer.flush();
    // Never past the linger, nor past the time to stop claiming.
    const until = Math.min((this.#drySince ?? clock.now()) + lingerMs, this.#deadline.stopClaimingAt);
    const waitMs = Math.max(0, Math.min(lingerPollMs, until - clock.now()));
    // Kept alive: nothing else may be pending (an idle pool lets the process exit).
    const woke = new Promise<void>((resolve) => clock.setTimer(resolve, waitMs, { keepAlive: true }));
    // Once per dry spell, not per look.
    if (!this.#lingerLogged) {
      this.#lingerLogged = true;
      this.settings.logger.info('lingering', { invocationId: this.invocationId, lingerMs, lingerPollMs });
    }
    await woke;
    this.#to(this.#someKindFits() ? 'running' : 'deadline');
  }

  /** When a rate's next token comes back (on this clock), if the invocation may wait for it. */
  #mayPace(): boolean {
    const next = this.#nextStart;
    if (!next || this.#pacedInVain || this.settings.rateWaitMs === 0) return false;
    const at = next.claimedAt + next.inMs;
    return at - this.settings.clock.now() <= this.settings.rateWaitMs && at < this.#deadline.stopClaimingAt;
  }

  /** A rate holds the work back: write the outcomes, wait for its next token, look again. */
  async #pace(): Promise<void> {
    this.#to('pacing');
    const { clock } = this.settings;
    await this.#buffer.flush();
    const next = this.#nextStart as { inMs: number; claimedAt: number };
    const waitMs = Math.max(0, next.claimedAt + next.inMs - clock.now());
    this.#ledger.rateWait(waitMs);
    this.#pacing = true;
    await new Promise<void>((resolve) => clock.setTimer(resolve, waitMs, { keepAlive: true }));
    this.#to(this.#someKindFits() ? 'running' : 'deadline');
  }

  /**
   * Starts waiting jobs while slots are free; returns the ones to give back (they no longer fit).
   * The jobs of a batch kind start together, up to its `batch.size` (one slot per batch, in claim
   * order); a batch that came short and may wait to fill is set aside for #fill instead.
   */
  #startWaiting(claimedAt = this.#claimedAt): ClaimedJob[] | undefined {
    const { concurrency, kinds, leaseGraceMs, clock } = this.settings;
    const waiting = this.#waiting;
    if (waiting.length === 0) return undefined;
    const release: ClaimedJob[] = [];
    /** Jobs taken into a batch from further down the queue. */
    let grouped: Set<ClaimedJob> | undefined;
    let taken = 0;
    while (this.#inflight < concurrency && taken < waiting.length) {
      const job = waiting[taken++] as ClaimedJob;
      if (grouped?.has(job)) continue;
      const kind = kinds.get(job.kind) as Kind;
      const { timeoutMs, batch } = kind.definition;
      // Its lease started at the claim: a job that waited locally too long to finish inside it
      // is given back rather than started (someone else could rescue it mid-run).
      // One reading of the clock per job: the checks and the attempt's start share it.
      const now = clock.now();
      const leaseLeft = claimedAt + timeoutMs + leaseGraceMs - now;
      if (!(this.#fits(kind, now) && leaseLeft >= timeoutMs)) {
        release.push(job);
        continue;
      }
      if (!batch) {
        this.#start(job, kind, now);
        continue;
      }
      grouped ??= new Set();
      const members = [job];
      for (let i = taken; i < waiting.length && members.length < batch.size; i++) {
        const other = waiting[i] as ClaimedJob;
        if (other.kind !== job.kind || grouped.has(other)) continue;
        members.push(other);
        grouped.add(other);
      }
      const until = this.#fillUntil(kind, members.length);
      if (until !== undefined) {
        this.#filling = { kind, jobs: members, until };
        break;
      }
      this.#startBatch(members, kind);
    }
    // Once, not a shift() per job; all of them taken (the usual case): emptied without splice's copy.
    if (taken === waiting.length) waiting.length = 0;
    else waiting.splice(0, taken);
    if (grouped && grouped.size > 0 && waiting.length > 0) {
      const rest = waiting.filter((j) => !(grouped as Set<ClaimedJob>).has(j));
      waiting.splice(0, waiting.length, ...rest);
    }
    if (waiting.length > 0 && !this.#someKindFits()) release.push(...waiting.splice(0));
    return release.length > 0 ? release : undefined;
  }

  /**
   * Until when a batch of `kind` that has `count` jobs may wait to fill: its maxWaitMs from the
   * claim, but never past its first jobs' lease grace (they must still have their whole timeout
   * when it starts) nor past the last moment the batch still fits the budget. Undefined: start now.
   */
  #fillUntil(kind: Kind, count: number): number | undefined {
    const { batch, timeoutMs } = kind.definition;
    if (!batch || batch.maxWaitMs === 0 || count >= batch.size) return undefined;
    if (this.#state !== 'running' && this.#state !== 'draining' && this.#state !== 'finishing') return undefined;
    const claimedAt = this.#claimedAt;
    const until = Math.min(
      claimedAt + batch.maxWaitMs,
      claimedAt + this.settings.leaseGraceMs,
      this.#deadline.stopClaimingAt - timeoutMs,
    );
    return until > this.settings.clock.now() ? until : undefined;
  }

  /**
   * A batch came short: claim jobs of its kind alone, every fillPollMs, until it is full or its
   * wait is over; then start it, and go back to the state the loop was in. Nothing else starts
   * meanwhile (what runs goes on; its outcomes ride along with the next claim of the loop).
   */
  async #fill(): Promise<void> {
    const filling = this.#filling as Filling;
    const back = this.#state as 'running' | 'draining' | 'finishing';
    this.#to('filling');
    const { kind, jobs, until } = filling;
    const { size, maxWaitMs } = kind.definition.batch as NonNullable<Kind['definition']['batch']>;
    const { clock } = this.settings;
    try {
      while (jobs.length < size && clock.now() < until) {
        jobs.push(...(await this.#claimFor(kind, size - jobs.length)));
        const waitMs = Math.min(fillPollMs(maxWaitMs), until - clock.now());
        if (jobs.length >= size || waitMs <= 0) break;
        await new Promise<void>((resolve) => clock.setTimer(resolve, waitMs, { keepAlive: true }));
      }
    } catch (err) {
      this.#filling = undefined;
      this.#waiting.unshift(...jobs); // the error path gives them back
      throw err;
    }
    this.#filling = undefined;
    this.#startBatch(jobs, kind);
    this.#to(back);
  }

  /** One claim of `kind`'s jobs alone (a batch filling), without outcomes riding along. */
  async #claimFor(kind: Kind, limit: number): Promise<ClaimedJob[]> {
    const leases = [{ kind: kind.definition.kind, leaseMs: kind.definition.timeoutMs + this.settings.leaseGraceMs }];
    const leaseToken = randomUUID();
    try {
      const claimed = await this.#deadline.inTime(
        traced(this.settings.tracing, this.settings.queues, () =>
          this.#claimStatement({ leases, limit, leaseToken, settle: [] }),
        ),
      );
      this.#ledger.claimed(claimed.jobs.length);
      return claimed.jobs;
    } catch (err) {
      if (err instanceof OutcomeUnknownError) {
        this.#lostClaim = leaseToken;
        this.#ledger.answerLost('claim');
      }
      throw err;
    }
  }

  /** The claim statement with this invocation's rules; `settle`: the outcomes riding along. */
  #claimStatement(claim: {
    leases: { kind: string; leaseMs: number }[];
    limit: number;
    leaseToken: string;
    settle: ReturnType<typeof outcomesOf>;
  }): Promise<ClaimResult> {
    const { db, schema, queues, completion } = this.settings;
    return claimJobs(db.executor, schema, {
      leases: claim.leases,
      queues,
      limit: claim.limit,
      ...this.#admission?.lanePlan(this.#claims++),
      invocationId: this.invocationId,
      leaseToken: claim.leaseToken,
      now: statementNow(this.settings),
      settle: claim.settle,
      completion,
      limits: this.settings.limits,
      rateLimits: this.settings.rateLimits,
      windows: this.settings.windows,
      limited: this.settings.claimShape.limited,
      ordered: this.settings.claimShape.ordered,
      rated: this.settings.claimShape.rated,
    });
  }

  /** Starts one attempt; `now`: the clock's reading as it starts. */
  #start(job: ClaimedJob, kind: Kind, now: number): void {
    const attempt = new Attempt(job, kind, this, undefined, now);
    this.settings.metrics?.started(job);
    this.#inflight++;
    this.#watchdog.watch(attempt);
    attempt.run();
  }

  /** Starts one batch handler call: one slot, one watch (one timeout for all its jobs). */
  #startBatch(jobs: ClaimedJob[], kind: Kind): void {
    const batch = new BatchRun(jobs, kind, this);
    for (const job of jobs) this.settings.metrics?.started(job);
    this.#inflight++;
    this.#watchdog.watch(batch);
    batch.run();
  }

  /** Gives jobs back unstarted: no attempt counted, claimable at once. */
  async #release(jobs: ClaimedJob[]): Promise<void> {
    const { db, schema } = this.settings;
    this.#ledger.released(
      jobs.length,
      await this.#deadline.inTime(releaseJobs(db.executor, schema, jobs, statementNow(this.settings))),
    );
  }

  /** Claims the next batch in one statement, which also writes the buffered outcomes. Returns how many jobs came. */
  async #claim(): Promise<number> {
    this.#to('claiming');
    const { queues, concurrency, batchSize, leaseGraceMs, drain, clock } = this.settings;
    const buffer = this.#buffer;
    // Too many to ride along: settled by a statement of their own, which runs alongside the claim
    // when the pool has a second connection (flush() takes the buffer at once).
    const settling = buffer.size > RIDE_ALONG_MAX ? buffer.flush() : undefined;
    const batch = buffer.take();
    this.#claimedAt = clock.now();
    this.#firstClaimAt ??= this.#claimedAt;
    // The slots that came free are being filled: their timer would only wake the loop for nothing
    // (one spurious turn per batch, flushIntervalMs later).
    this.#freeSince = undefined;
    this.#cancelFreeTimer?.();
    this.#cancelFreeTimer = undefined;
    // Claim only what can start now or once the attempts ending before the answer comes have
    // ended (at most batchSize; see ClaimAhead), unless a local queue was asked for (batchSize >
    // concurrency): a claimed job's lease runs from the claim, not from its start.
    const free = concurrency - this.#inflight;
    let limit = batchSize > concurrency ? batchSize : Math.min(batchSize, free + this.#endingSoon().count);
    const leases: { kind: string; leaseMs: number }[] = [];
    for (const kind of this.settings.kindList) {
      if (this.#fits(kind)) {
        leases.push({ kind: kind.definition.kind, leaseMs: kind.definition.timeoutMs + leaseGraceMs });
        // A batch takes one slot and up to batch.size jobs: ask for that many per free slot. Jobs of
        // other kinds may then come in more than the free slots, and wait locally (released when
        // their lease no longer covers them). Asking for one batch per claim instead halved the
        // bench's batch_handler figures (slots stayed idle between claims).
        const size = kind.definition.batch?.size;
        if (size !== undefined) limit = Math.max(limit, Math.min(free * size, MAX_CLAIM));
      }
    }
    const leaseToken = randomUUID();
    const sentAt = this.#claimedAt;
    const [settled, claimed] = await Promise.allSettled([
      settling,
      this.#deadline
        .inTime(
          traced(this.settings.tracing, queues, () =>
            this.#claimStatement({ leases, limit, leaseToken, settle: outcomesOf(batch) }),
          ),
        )
        .then((answer) => {
          this.#ahead.answered(clock.now() - sentAt);
          return answer;
        }),
    ]);
    // Jobs claimed are taken in even if the settle beside the claim failed: the error path then
    // gives them back instead of leaving them to their leases.
    if (claimed.status === 'fulfilled') {
      this.settings.claimShape.limited = claimed.value.limited;
      this.settings.claimShape.ordered = claimed.value.ordered;
      this.settings.claimShape.rated = claimed.value.rated;
      await buffer.settled(batch, claimed.value.settled);
      this.#ledger.claimed(claimed.value.jobs.length);
      for (const p of claimed.value.probes) {
        this.#ledger.breaker({ destination: p.destination, from: 'open', to: 'half_open', probeJobId: p.jobId });
      }
      this.#waiting.push(...claimed.value.jobs);
    } else {
      // Not known to be written: the error path's last flush sends them again.
      buffer.putBack(batch, claimed.reason);
      if (claimed.reason instanceof OutcomeUnknownError) {
        this.#lostClaim = leaseToken;
        this.#ledger.answerLost('claim');
      }
    }
    if (settled.status === 'rejected') throw settled.reason;
    if (claimed.status === 'rejected') throw claimed.reason;
    const found = claimed.value.jobs.length;
    if (found > 0) {
      this.#drySince = undefined;
      this.#lingerLogged = false;
    }
    const { nextStartInMs } = claimed.value;
    this.#nextStart = nextStartInMs === null ? undefined : { inMs: nextStartInMs, claimedAt: this.#claimedAt };
    this.#pacedInVain = this.#pacing && found === 0;
    this.#pacing = false;
    // A full batch: there may be more ready work than this invocation can finish in time.
    if (found === limit && drain) this.#admission?.consider(this.#finished, this.#firstClaimAt);
    // Children the settled outcomes released are ready now, but this claim could not see them.
    this.#to(!drain ? 'finishing' : found < limit && !claimed.value.endedParents ? 'draining' : 'running');
    return found;
  }

  #someKindFits(): boolean {
    for (const kind of this.settings.kindList) if (this.#fits(kind)) return true;
    return false;
  }

  /**
   * Whether an attempt of `kind` started now would end before claiming stops — and, for a kind
   * whose job just went on to a later invocation (its next step did not fit), never again in this
   * one: claiming that job back at once would only suspend it again.
   */
  #fits(kind: Kind, now?: number): boolean {
    return this.#deadline.fits(kind, 0, now) && !this.#continuedKinds.has(kind.definition.kind);
  }

  /** AttemptHost: an attempt ended. Its bookkeeping waits for a microtask, never under the loop's feet. */
  ended(attempt: Attempt): void {
    this.#ended.push(attempt);
    if (this.#ended.length === 1) queueMicrotask(this.#deliver);
  }

  readonly #deliver = (): void => {
    const ended = this.#ended;
    this.#ended = [];
    // One reading of the clock for all of them: they ended before this microtask.
    const now = this.settings.clock.now();
    for (const attempt of ended) {
      this.#finished++;
      // A batch's jobs end one by one; its slot comes free with the last.
      const { batch } = attempt;
      if (!batch || batch.memberEnded()) {
        this.#watchdog.forget(batch ?? attempt);
        this.#inflight--;
      }
      if (!batch) this.#ahead.ended(attempt.kind.definition.kind, now - attempt.startedAt);
      if (this.#freeSince === undefined && this.#inflight < this.settings.concurrency) {
        // A slot came free: claim when half a batch is free, or when this one has waited enough
        // (the timer wakes the loop even when no outcome is buffered, e.g. a transactional kind).
        this.#freeSince = now;
        this.#cancelFreeTimer = this.settings.clock.setTimer(this.#notify, this.settings.flushIntervalMs);
      }
      const { end } = attempt;
      if (end === 'committed') this.#ledger.committed(attempt.job, attempt.startedAt);
      else if (end === 'lease_lost') this.#ledger.leaseLost(attempt.job, attempt.startedAt);
      else if (end && 'suspended' in end) {
        if (end.suspended === 'continued') this.#continuedKinds.add(attempt.kind.definition.kind);
        this.#ledger.suspended(end, attempt.startedAt);
      } else if (end) this.#buffer.add(end, attempt.failedInDoubt);
    }
    this.#notify();
  };

  readonly #notify = (): void => {
    const wake = this.#wake;
    this.#wake = undefined;
    if (wake) wake();
    else this.#changedMeanwhile = true;
  };

  #nextChange(): Promise<void> | undefined {
    if (this.#changedMeanwhile) {
      this.#changedMeanwhile = false;
      return undefined;
    }
    return new Promise<void>((resolve) => {
      this.#wake = resolve;
    });
  }

  async #fail(err: unknown): Promise<void> {
    this.#to('failing');
    this.#ledger.failed(err);
    // Outcomes not written are not lost: their leases expire and the jobs are rescued. Still,
    // try once to write what finished (the failure may not have been the database's) — unless
    // the deadline is what stopped us.
    if (err instanceof InvocationDeadlineError) {
      this.#to('stopped');
      return;
    }
    while (this.#inflight > 0) await this.#nextChange();
    await this.#buffer.flush().catch(() => {});
    const { db, schema } = this.settings;
    if (this.#waiting.length > 0) {
      // Best effort: give back what never started, so it need not wait for its lease.
      const jobs = this.#waiting.splice(0);
      const released = await this.#deadline
        .inTime(releaseJobs(db.executor, schema, jobs, statementNow(this.settings)))
        .catch(() => [] as string[]);
      this.#ledger.released(released.length, released);
    }
    if (this.#lostClaim !== undefined) {
      // The claim may have taken jobs this invocation never heard of: give them back by its token
      // (fenced; nothing when it did not commit). If this fails too, their leases run out.
      const claim = { leaseToken: this.#lostClaim, invocationId: this.invocationId };
      const released = await this.#deadline
        .inTime(releaseClaim(db.executor, schema, claim, statementNow(this.settings)))
        .catch(() => [] as string[]);
      if (released.length > 0) this.#ledger.released(released.length, released);
    }
    this.#to('stopped');
  }
}

/** No attempt ending before a claim's answer, and none coming that close. */
const NONE_ENDING = { count: 0, nextAt: Number.POSITIVE_INFINITY } as const;

/** The most jobs one claim asks for (a batch kind's claims: batch.size per free slot). */
const MAX_CLAIM = 1_000;

/** A batch set aside to fill: its kind, the jobs it has, and until when it may wait. */
interface Filling {
  kind: Kind;
  jobs: ClaimedJob[];
  until: number;
}

/** How often a filling batch claims again: a fifth of its maxWaitMs, from 10 to 250 ms. */
export function fillPollMs(maxWaitMs: number): number {
  return Math.max(10, Math.min(250, Math.round(maxWaitMs / 5)));
}

/** The claim, in a span when the worker traces. */
function traced(
  tracing: Tracing | undefined,
  queues: readonly string[] | undefined,
  claim: () => Promise<ClaimResult>,
): Promise<ClaimResult> {
  return tracing ? tracing.claim(queues, claim, (result) => result.jobs.length) : claim();
}
