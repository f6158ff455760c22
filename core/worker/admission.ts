import { scrubSecrets } from '../../base/scrub-secrets.js';
import type { InvocationStarter } from '../../base/starter.js';
import { CLAIM_LANES } from '../../db/statements/claim.js';
import { readBacklog, registerInvocation, unregisterInvocation } from '../../db/statements/invocations.js';
import type { Deadline } from './deadline.js';
import { statementNow, type WorkerSettings } from './settings.js';

export type { InvocationStarter } from '../../base/starter.js';

/**
 * With more than this many invocations of a worker running, theirs claim from lanes (see
 * CLAIM_LANES); up to this many keep the strict claim order of the head.
 */
export const LANES_AFTER = 4;

/** A count of running invocations no worker reaches (maxInvocations is at most 1000): the lane never applies. */
const NO_LANE = 2_147_483_647;

/** How often, at most, an invocation reads the backlog to decide on fan-out (its clock). */
const FAN_OUT_CHECK_MS = 1_000;
/**
 * Invocations this one started are counted as arriving for this long (a cold start), so the next
 * check does not start them again before they have registered.
 */
const ARRIVAL_MS = 10_000;

/**
 * The cap on running invocations of one worker and the fan-out above it. An invocation registers
 * in one of `maxInvocations` slots before it claims (finding none, it returns at once: enough run
 * already), frees its slot as it returns, and while it claims full batches it reads the backlog
 * now and then: when the ready work could not drain within `fanOutTargetMs` at the rate it
 * measured, it starts the invocations that would (never past the cap: the slots decide). Only
 * the oldest registered invocation starts others, so the decision is made once, not by each
 * sibling, and by the one that knows which of them are still on their way.
 */
export class Admission {
  readonly #settings: WorkerSettings;
  readonly #max: number;
  readonly #invocationId: string;
  readonly #deadline: Deadline;
  /** The slot this invocation holds, once registered. */
  #slot: number | null = null;
  #lastCheck = Number.NEGATIVE_INFINITY;
  #starting: Promise<void> | undefined;
  /** When this invocation last started others, and how many it then expected to be running. */
  #lastStart: { at: number; expectRunning: number } | undefined;
  /** Invocations this one asked the platform to start. */
  started = 0;

  constructor(settings: WorkerSettings, max: number, invocationId: string, deadline: Deadline) {
    this.#settings = settings;
    this.#max = max;
    this.#invocationId = invocationId;
    this.#deadline = deadline;
  }

  /**
   * Takes a slot; false when every slot is held by a running invocation. A try that finds its slot
   * taken under it waited for that registrant to commit, so the next try sees one more slot held:
   * after `max + 1` tries this invocation has a slot or has seen them all held — never a refusal
   * while a slot is free.
   */
  async register(): Promise<boolean> {
    const { db, schema, name, leaseGraceMs, clock } = this.#settings;
    for (let tries = 0; tries <= this.#max; tries++) {
      const registration = await this.#deadline.inTime(
        registerInvocation(db.executor, schema, {
          worker: name,
          invocationId: this.#invocationId,
          max: this.#max,
          // The registration outlives the invocation by the lease grace, as its jobs' leases do.
          ttlMs: Math.max(1, this.#deadline.at - clock.now()) + leaseGraceMs,
          now: statementNow(this.#settings),
        }),
      );
      if (registration.slot !== null) {
        this.#slot = registration.slot;
        return true;
      }
      if (registration.running >= this.#max) return false;
    }
    return false;
  }

  /**
   * Where this invocation's `claims`-th claim looks first, once registered: the next lane from its
   * slot on (siblings hold distinct slots, so they start apart and every lane is visited) — used only
   * while more than LANES_AFTER invocations of this worker run, which the claim itself counts. Lane 0
   * is the head instead: every CLAIM_LANES-th claim of each invocation takes the head in strict
   * order, so an urgent job in any lane waits about one round of claims at most. It is sent as the
   * same statement with a lane that never applies (NO_LANE): one text, so one plan per connection,
   * not a second for the head.
   */
  lanePlan(claims: number): { lane: number; laneWhen: { worker: string; moreThan: number } } {
    const lane = this.#slot === null ? 0 : (this.#slot + claims) % CLAIM_LANES;
    return { lane, laneWhen: { worker: this.#settings.name, moreThan: lane === 0 ? NO_LANE : LANES_AFTER } };
  }

  /**
   * After a claim that filled its batch: reads the backlog at most once a second and starts the
   * invocations it needs. `finished` attempts since `since` give this invocation's rate.
   */
  consider(finished: number, since: number): void {
    const { fanOut, clock } = this.#settings;
    const now = clock.now();
    if (!fanOut || this.#starting || now - this.#lastCheck < FAN_OUT_CHECK_MS) return;
    const elapsed = now - since;
    if (finished === 0 || elapsed <= 0) return; // no rate measured yet
    this.#lastCheck = now;
    const window = Math.min(this.#settings.fanOutTargetMs, this.#deadline.stopClaimingAt - now);
    const perInvocation = (finished / elapsed) * window; // jobs one invocation finishes in the window
    if (!(perInvocation > 0)) return;
    this.#starting = this.#fanOut(perInvocation, fanOut).finally(() => {
      this.#starting = undefined;
    });
  }

  async #fanOut(perInvocation: number, starter: InvocationStarter): Promise<void> {
    const { db, schema, name, kindList, queues, logger } = this.#settings;
    try {
      const backlog = await this.#deadline.inTime(
        readBacklog(db.executor, schema, {
          worker: name,
          kinds: kindList.map((k) => k.definition.kind),
          queues,
          // Past what `max` invocations finish in the window, more backlog changes nothing.
          cap: Math.min(1_000_000, Math.ceil(perInvocation * this.#max) + 1),
          now: statementNow(this.#settings),
        }),
      );
      // One invocation decides for all — the oldest registered — so that siblings that start together
      // do not each start the same missing invocations (they cannot see each other's starts).
      if (backlog.leaderSlot !== this.#slot) return;
      const needed = Math.min(this.#max, Math.ceil(backlog.ready / perInvocation));
      const now = this.#settings.clock.now();
      const last = this.#lastStart;
      const arriving = last && now - last.at < ARRIVAL_MS ? Math.max(0, last.expectRunning - backlog.running) : 0;
      const count = needed - backlog.running - arriving;
      if (count <= 0) return;
      this.#lastStart = { at: now, expectRunning: backlog.running + arriving + count };
      this.started += count;
      logger.info('fan_out', {
        worker: name,
        invocationId: this.#invocationId,
        ready: backlog.ready,
        running: backlog.running,
        arriving,
        starting: count,
        max: this.#max,
      });
      await starter.start(count);
    } catch (err) {
      // A start that fails is only a hint lost: the next tick (or the next check) makes up for it.
      const error = err instanceof Error ? scrubSecrets(err.message) : 'non-Error thrown';
      logger.warn('fan_out_failed', { worker: name, error });
    }
  }

  /** Frees the slot and waits for a start still under way (both bounded by the deadline). */
  async close(): Promise<void> {
    if (this.#starting) await this.#deadline.inTime(this.#starting).catch(() => {});
    if (this.#slot === null) return;
    this.#slot = null;
    const { db, schema, name } = this.#settings;
    // Best effort: a slot not freed expires with the registration.
    await this.#deadline
      .inTime(unregisterInvocation(db.executor, schema, { worker: name, invocationId: this.#invocationId }))
      .catch(() => {});
  }
}
