import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DatabaseError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { queryRows } from '../../db/execute.js';
import type { Executor } from '../../db/executor.js';
import { migrate } from '../../db/migrate.js';
import { freePort } from '../../scripts/local-postgres.js';
import { ManualClock } from '../../testing/clock.js';
import { configureNeonForLocalPostgres, databaseUrl, openDb, testDriver, testNeonOptions } from '../helpers/db.js';

const db = openDb({ statementTimeoutMs: 300 });
afterAll(() => db.close());

/** The test database's URL with a password and an unreachable port. */
function unreachableUrl(): string {
  const url = new URL(databaseUrl());
  url.password = 'sekret-pw';
  url.port = '1';
  return url.toString();
}

describe(`connections (${testDriver()})`, () => {
  it('runs statements under the configured statement_timeout (pg, neon-ws); neon-http uses the role default', async () => {
    const [row] = await queryRows<{ statement_timeout: string }>(db.executor, sql`show statement_timeout`, 'skiplock');
    if (testDriver() === 'neon-http') {
      expect(row?.statement_timeout).toBe('0');
      return;
    }
    expect(row?.statement_timeout).toBe('300ms');
    const error = await queryRows(db.executor, sql`select pg_sleep(2)`, 'skiplock').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as DatabaseError).sqlState).toBe('57014');
  });

  it('turns JIT off on its sessions unless jit: true (pg, neon-ws); neon-http keeps the server setting', async () => {
    const jitOf = async (handle: { executor: Executor }) =>
      (await queryRows<{ jit: string }>(handle.executor, sql`show jit`, 'skiplock'))[0]?.jit;
    const server = 'on'; // the test server's postgresql.conf default
    const withJit = openDb({ jit: true });
    const fresh = openDb();
    try {
      expect(await jitOf(withJit)).toBe(server);
      // The very first statement on a new connection already runs without JIT, and so do the next.
      const expected = testDriver() === 'neon-http' ? server : 'off';
      expect(await Promise.all([jitOf(fresh), jitOf(fresh), jitOf(fresh)])).toEqual([expected, expected, expected]);
    } finally {
      await withJit.close();
      await fresh.close();
    }
  });

  it('an unreachable database gives a DatabaseError without the password or the URL', async () => {
    const down = openDb({ connectionString: unreachableUrl(), connectionTimeoutMs: 2_000 });
    try {
      const error = await queryRows(down.executor, sql`select 1`, 'skiplock').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DatabaseError);
      expect(String((error as Error).message)).not.toContain('sekret-pw');
      expect(JSON.stringify(error)).not.toContain('sekret-pw');
    } finally {
      await down.close();
    }
  });

  it('an endpoint nothing listens on gives a readable DatabaseError, without the password', async () => {
    // Every driver's first hop is closed: Postgres itself (pg), the WebSocket proxy (neon-ws,
    // whose driver rejects with a WebSocket ErrorEvent, not an Error), the SQL-over-HTTP endpoint.
    const closed = await freePort();
    const down = openDb({
      connectionString: unreachableUrl(),
      connectionTimeoutMs: 2_000,
      neon: {
        ...testNeonOptions(),
        wsProxy: (host, port) => `127.0.0.1:${closed}/v1?address=${host}:${port}`,
        fetchEndpoint: `http://127.0.0.1:${closed}/sql`,
      },
    });
    try {
      // One statement, and a transaction (or a neon-http batch): the driver fails differently.
      for (const attempt of [
        () => queryRows(down.executor, sql`select 1`, 'skiplock'),
        () => migrate(down, { schema: 'skiplock_unreachable' }),
      ]) {
        const error = await attempt().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseError);
        const message = (error as Error).message;
        expect(message).toMatch(/ECONNREFUSED|refused|fetch failed/i);
        expect(message).not.toMatch(/\[object Object\]|^query failed$/);
        expect(message).not.toContain('sekret-pw');
        expect(JSON.stringify(error)).not.toContain('sekret-pw');
      }
    } finally {
      await down.close();
      configureNeonForLocalPostgres();
    }
  });

  it('a worker on an unreachable database returns a failure summary instead of throwing', async () => {
    const down = openDb({ connectionString: unreachableUrl(), connectionTimeoutMs: 2_000 });
    const lines: string[] = [];
    try {
      const job = defineJob({ kind: 'k', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
      // The invocation's clock stands still, so its 10 s budget never runs out: the summary comes
      // back because the worker stopped at the failure, not because it waited out its time.
      const clock = new ManualClock();
      const summary = await createWorker({
        db: down,
        jobs: [job],
        clock,
        logger: {
          ...silentLogger,
          error: (m, f) => lines.push(JSON.stringify({ m, ...f })),
          info: (m, f) => lines.push(JSON.stringify({ m, ...f })),
        },
      }).runInvocation({ remainingMs: 10_000 });
      expect(summary).toMatchObject({ claimed: 0, stoppedBecause: 'error', durationMs: 0 });
      expect(summary.error).toBeTruthy();
      expect(lines.join('\n')).not.toContain('sekret-pw');
      expect(lines.some((l) => l.includes('invocation_failed'))).toBe(true);
    } finally {
      await down.close();
    }
  });
});
