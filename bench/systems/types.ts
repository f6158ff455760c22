/** One queue under test. Every method works on the database `setup` was given. */
export interface BenchSystem {
  name: string;
  /** The configuration used, printed with the results. */
  settings: Record<string, unknown>;
  setup(url: string): Promise<void>;
  /** n jobs, one per transaction. */
  enqueueSingle(n: number): Promise<void>;
  /** n jobs in batches. */
  enqueueBulk(n: number, batch: number): Promise<void>;
  /** Drains the queue with k concurrent workers; resolves when every job is done. */
  process(k: number): Promise<void>;
  teardown(): Promise<void>;
}
