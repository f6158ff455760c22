import { OutcomeUnknownError } from '../../base/errors.js';
import type { Outcome, SettleReport } from '../../base/outcomes.js';
import { findSettledEarlier, settleOutcomes } from '../../db/statements/settle.js';
import type { PendingOutcome } from './attempt.js';
import type { Deadline } from './deadline.js';
import { statementNow, type WorkerSettings } from './settings.js';
import type { Ledger } from './summary.js';

/**
 * Up to this many outcomes ride along with the next claim, in one statement. A larger batch is
 * written by a statement of its own first. A statement sees the queue as it was when it began,
 * so a claim that runs after a long settle meets rows that other workers claimed meanwhile and
 * must re-check each one (auto_explain at 16 invocations, batches of 500: 2,637 index entries
 * visited per claim after a settle in the same statement, 1,539 in a statement of its own;
 * 15–20% more jobs/s at batch 500). For small batches the round trip saved weighs more.
 */
export const RIDE_ALONG_MAX = 128;

/**
 * Outcomes of ended attempts, waiting to be written: normally by the next claim (they ride
 * along), or by a statement of their own once the oldest has waited flushIntervalMs. An outcome
 * taken out for a statement that then fails is put back, so a later flush still writes it.
 */
export class OutcomeBuffer {
  #items: PendingOutcome[] = [];
  /**
   * Outcomes sent in a statement whose answer was lost (it may have committed): when they are sent
   * again and come back lost, they are looked up — a row this worker settled earlier is counted as
   * what it became, not as a lost lease.
   */
  readonly #doubtful = new Set<PendingOutcome>();
  /**
   * The oldest buffered outcome has waited flushIntervalMs. Set by the timer (a flag, not a
   * comparison of clocks: a timer may fire a fraction of a millisecond "early" by performance.now()).
   */
  #due = false;
  #cancelTimer: (() => void) | undefined = undefined;
  readonly #settings: WorkerSettings;
  readonly #deadline: Deadline;
  readonly #ledger: Ledger;
  readonly #onDue: () => void;

  /** `onDue` is called when the flush timer fires: the loop should wake and write. */
  constructor(settings: WorkerSettings, deadline: Deadline, ledger: Ledger, onDue: () => void) {
    this.#settings = settings;
    this.#deadline = deadline;
    this.#ledger = ledger;
    this.#onDue = onDue;
  }

  get size(): number {
    return this.#items.length;
  }

  get due(): boolean {
    return this.#due;
  }

  /** `inDoubt`: the attempt failed on a statement whose answer was lost (see #doubtful). */
  add(item: PendingOutcome, inDoubt = false): void {
    if (inDoubt) this.#doubtful.add(item);
    if (this.#items.length === 0) {
      this.#due = false;
      this.#cancelTimer?.();
      this.#cancelTimer = this.#settings.clock.setTimer(this.#timerFired, this.#settings.flushIntervalMs);
    }
    this.#items.push(item);
    // The next job of its ordering key waits for this outcome: write it now, not within flushIntervalMs.
    if (item.job.orderingKey && !this.#due) this.#timerFired();
  }

  /** Empties the buffer into a batch for one statement. Give it to `settled` or `putBack`. */
  take(): PendingOutcome[] {
    const batch = this.#items;
    this.#items = [];
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    return batch;
  }

  /** A batch whose statement failed with `err`: back in front, for the next flush. */
  putBack(batch: PendingOutcome[], err?: unknown): void {
    if (batch.length === 0) return;
    this.#items = batch.concat(this.#items);
    if (err instanceof OutcomeUnknownError) for (const item of batch) this.#doubtful.add(item);
  }

  /**
   * What the database made of a batch: into the summary and the logs. Outcomes it reports lost
   * that an earlier statement may have written are looked up first (findSettledEarlier).
   */
  async settled(batch: readonly PendingOutcome[], report: SettleReport): Promise<void> {
    if (this.#doubtful.size > 0) {
      const doubtful = batch.filter((item) => this.#doubtful.delete(item) && report.lost.has(item.job.id));
      if (doubtful.length > 0) await this.#confirm(doubtful, report);
    }
    this.#ledger.settled(batch, report);
  }

  async #confirm(doubtful: readonly PendingOutcome[], report: SettleReport): Promise<void> {
    const { db, schema, completion } = this.#settings;
    const earlier = await this.#deadline.inTime(
      findSettledEarlier(
        db.executor,
        schema,
        doubtful.map((item) => item.outcome),
      ),
    );
    for (const job of earlier.settled) {
      report.lost.delete(job.id);
      if (job.state !== 'completed') report.changed.set(job.id, job);
    }
    // Deleted on completion: by this worker's earlier settle (another holder would need this lease to
    // have expired first, and the settle comes well inside it).
    const gone = new Set(earlier.gone);
    for (const item of doubtful) {
      if (completion === 'delete' && item.outcome.outcome === 'completed' && gone.has(item.job.id)) {
        report.lost.delete(item.job.id);
      }
    }
    this.#ledger.confirmed(doubtful.filter((item) => !report.lost.has(item.job.id)).length);
  }

  /** Writes everything buffered in a statement of its own. */
  async flush(): Promise<void> {
    if (this.#items.length === 0) return;
    const batch = this.take();
    const { db, schema, completion } = this.#settings;
    let report: SettleReport;
    try {
      report = await this.#deadline.inTime(
        settleOutcomes(db.executor, schema, outcomesOf(batch), statementNow(this.#settings), completion),
      );
    } catch (err) {
      this.putBack(batch, err);
      if (err instanceof OutcomeUnknownError) this.#ledger.answerLost('settle');
      throw err;
    }
    await this.settled(batch, report);
  }

  readonly #timerFired = (): void => {
    this.#due = true;
    this.#onDue();
  };
}

export function outcomesOf(batch: readonly PendingOutcome[]): Outcome[] {
  return batch.map((item) => item.outcome);
}
