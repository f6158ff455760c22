import type pg from 'pg';

/**
 * Waits until `read` returns a value `done` accepts, reading every 25 ms, for at most `timeoutMs`:
 * the outcome of work another runtime does (a nudge's invocation runs after the response that
 * started it), not a wait for time to pass.
 */
export async function waitForOutcome<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000) {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface JobRow {
  state: string;
  attempt: number;
  result: unknown;
  kind: string;
}

/** One job's state as the database holds it, read outside the runtime under test. */
export async function jobRow(admin: pg.Pool, schema: string, id: string): Promise<JobRow | undefined> {
  const { rows } = await admin.query(`select state, attempt, result, kind from "${schema}".jobs where id = $1`, [id]);
  return rows[0] as JobRow | undefined;
}

export const PLATFORM_SECRETS = {
  CRON_SECRET: 'cron-secret-0123456789abcdef-0123456789',
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-0123456789abcdef-0123456789',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-0123456789abcdef-0123456789',
  SKIPLOCK_SIGNAL_SECRET: 'signal-secret-0123456789abcdef-0123456789',
} as const;
