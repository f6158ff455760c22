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

/**
 * Issue 12's flow-control phase: every job carries one of `keys` keys (job n gets key n % keys).
 * `ordering`: at most one running per key, in enqueue order; `perKey`: at most `perKey` running per key.
 */
export type Flow = { mode: 'ordering'; keys: number } | { mode: 'perKey'; keys: number; perKey: number };
export const flowKey = (flow: Flow, n: number) => `k${n % flow.keys}`;
