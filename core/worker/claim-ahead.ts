import type { ClaimedJob } from '../../base/rows.js';
import type { Watched } from './deadline.js';
import type { Kind } from './settings.js';

/**
 * Claiming ahead of the slots that will come free while a claim is out. A claim sent when slots are
 * free leaves them idle for its whole round trip, and the slots that free meanwhile wait for the
 * claim after it: over a slow link (neon-http, a database far from the function) the idle time per
 * job is about one round trip, and claims come back with fewer jobs, so statements per job grow too.
 * So the loop counts the attempts expected to end before a claim sent now is answered — each one's
 * time so far against its kind's usual duration in this invocation — as free already: it claims for
 * them (they wait locally for at most about one round trip), and it claims as soon as the slots
 * free or about to be free make half a batch, waking itself when the next attempt comes within a
 * round trip of its end (a timer on the invocation's clock).
 *
 * The peers fetch a fixed amount: graphile-worker a local queue of `localQueue.size` refilled when
 * empty, pg-boss `batchSize` per poll, River the free workers after a fetch cooldown. None of them
 * sizes the fetch from its round trip, which over HTTP to a serverless database is the cost that
 * matters. Here nothing is claimed beyond the invocation's concurrency (ahead counts only running
 * attempts), a job that waits locally still starts only while its lease covers its whole timeout
 * (else it is given back unstarted), and the invocation claims ahead only while its kinds fit the
 * time left after the round trips (see Invocation.#claim). Until a kind has ended once, its
 * attempts are not counted: the first claims are sized by the free slots alone.
 */
export class ClaimAhead {
  /** A claim's round trip on the invocation's clock (sent → answered, its settle included), smoothed; 0 until measured. */
  #roundTripMs = 0;
  /**
   * How long an attempt of each kind (by name) took in this invocation, smoothed. A record per kind,
   * updated in place: one lookup per ended attempt, and no number boxed for a Map per attempt.
   */
  readonly #jobMs = new Map<string, { ms: number }>();

  get roundTripMs(): number {
    return this.#roundTripMs;
  }

  /** A claim was answered `ms` after it was sent. */
  answered(ms: number): void {
    this.#roundTripMs = this.#roundTripMs === 0 ? ms : this.#roundTripMs + SMOOTHING * (ms - this.#roundTripMs);
  }

  /** An attempt of `kind` ended after `ms`. */
  ended(kind: string, ms: number): void {
    const known = this.#jobMs.get(kind);
    if (known === undefined) this.#jobMs.set(kind, { ms });
    else known.ms += SMOOTHING * (ms - known.ms);
  }

  /**
   * Of the `running` attempts, how many are expected to end before a claim sent `now` is answered
   * (counted up to `enough`: the loop only asks whether they make half a batch), and when the next
   * of the others comes within a round trip of its end (Infinity: none will). An attempt already past
   * twice its kind's usual duration is an outlier, not counted, and so is one of a kind that usually
   * takes no longer than a round trip; a batch is never counted (its jobs wait for a batch.size of
   * their own), nor an attempt of a kind with destinations.
   */
  endingSoon(
    running: Iterable<Watched>,
    now: number,
    enough = Number.POSITIVE_INFINITY,
  ): { count: number; nextAt: number } {
    let count = 0;
    let nextAt = Number.POSITIVE_INFINITY;
    const roundTrip = this.#roundTripMs;
    if (roundTrip === 0) return { count, nextAt };
    for (const attempt of running) {
      const { definition } = attempt.kind;
      // Nor a kind with destinations: its attempt's failure may open a breaker that the next claim
      // must see before it hands out another job for the same destination.
      if (definition.batch || definition.destination) continue;
      const usual = this.#jobMs.get(definition.kind)?.ms;
      // Attempts shorter than a round trip free their slots at once anyway: claiming ahead of them
      // would only send claims before their outcomes could ride along.
      if (usual === undefined || usual <= roundTrip) continue;
      const entersAt = attempt.startedAt + usual - roundTrip;
      if (entersAt > now) nextAt = Math.min(nextAt, entersAt);
      else if (now - attempt.startedAt <= 2 * usual && ++count >= enough) break;
    }
    return { count, nextAt };
  }

  /**
   * Whether the next claim may go out before `jobs` start: each of a kind that usually ends within a
   * round trip, so their slots are free again before a claim sent now is answered. Then the database
   * claims while this process runs them, instead of each waiting for the other (on one connection a
   * claim and a batch of no-op jobs otherwise take turns: 0.90× graphile-worker's rate at K = 1).
   * Not for a job whose outcome the next claim must see first: one with a destination (its failure
   * may open a breaker that must keep the next job of it from starting), one with an ordering key
   * (its outcome releases the next of its key), and not for the kinds that use the connection while
   * they run (a transactional kind) or wait for a batch.
   */
  endBeforeAnswer(jobs: readonly ClaimedJob[], kinds: ReadonlyMap<string, Kind>): boolean {
    const roundTrip = this.#roundTripMs;
    if (roundTrip === 0) return false;
    for (const job of jobs) {
      if (job.destination || job.orderingKey) return false;
      const definition = kinds.get(job.kind)?.definition;
      if (!definition || definition.batch || definition.transactional) return false;
      const usual = this.#jobMs.get(definition.kind)?.ms;
      if (usual === undefined || usual > roundTrip) return false;
    }
    return true;
  }
}

/**
 * Resolves once what is pending now has run, the I/O it started included: a statement handed to the
 * driver goes out on a later tick (a pool's checkout), and must leave before the jobs run.
 */
export function afterPendingWork(): Promise<void> {
  return new Promise((resolve) => {
    if (typeof setImmediate === 'function') setImmediate(resolve);
    else setTimeout(resolve, 0);
  });
}

/** The weight of a new measure in the smoothed round trip and durations. */
const SMOOTHING = 0.2;
