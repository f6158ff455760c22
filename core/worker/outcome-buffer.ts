import type { Outcome, SettleReport } from '../../base/outcomes.js';
import { settleOutcomes } from '../../db/statements/settle.js';
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

  add(item: PendingOutcome): void {
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

  /** A batch whose statement failed: back in front, for the next flush. */
  putBack(batch: PendingOutcome[]): void {
    if (batch.length > 0) this.#items = batch.concat(this.#items);
  }

  /** What the database made of a batch: into the summary and the logs. */
  settled(batch: readonly PendingOutcome[], report: SettleReport): void {
    this.#ledger.settled(batch, report);
  }

  /** Writes everything buffered in a statement of its own. */
  async flush(): Promise<void> {
    if (this.#items.length === 0) return;
    const batch = this.take();
    const { db, schema, completion } = this.#settings;
    let report: SettleReport;
    try {
      report = await this.#deadline.inTime(
        settleOutcomes(db.db, schema, outcomesOf(batch), statementNow(this.#settings), completion),
      );
    } catch (err) {
      this.putBack(batch);
      throw err;
    }
    this.settled(batch, report);
  }

  readonly #timerFired = (): void => {
    this.#due = true;
    this.#onDue();
  };
}

export function outcomesOf(batch: readonly PendingOutcome[]): Outcome[] {
  return batch.map((item) => item.outcome);
}
