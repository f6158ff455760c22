// skiplock/testing, used as an application's tests would use it.
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { connect, createEnqueuer, defineJob, getJob, migrate, RetryAfterError, silentLogger } from 'skiplock';
import { ManualClock, runJobs, startLocalNeon, TestTime } from 'skiplock/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { freePort } from '../../scripts/local-postgres.js';

const schema = `testing_${process.pid}`;
afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.query(`drop schema if exists test_onboarding_${process.pid} cascade`);
  await admin.query(`drop schema if exists test_faults_${process.pid} cascade`);
  await admin.query(`drop schema if exists test_digests_${process.pid} cascade`);
  await admin.end();
});

// docs/testing-your-app.md's example of a week-long flow, run as it is shown (its `it` joins this file).
process.env.TEST_DATABASE_URL = inject('databaseUrl');
await import('../../examples/docs/testing-steps.js');
// … and its example of an enqueue whose answer the stand-ins lose.
await import('../../examples/docs/faults.js');
// … and its example of a run-time schedule ticked at a chosen time.
await import('../../examples/docs/testing-runtime-schedules.js');

describe('skiplock/testing', () => {
  it('startLocalNeon points both Neon drivers at a local Postgres; runJobs runs the queue dry', async () => {
    const local = await startLocalNeon();
    try {
      const seen: string[] = [];
      const greet = defineJob({
        kind: 'greet',
        payload: z.object({ name: z.string() }),
        handler: (p, ctx) => {
          seen.push(`${p.name}:${ctx.attempt}`);
          // The first attempt asks to be retried at once: runJobs runs the retry in a later invocation.
          if (ctx.attempt === 1) throw new RetryAfterError(0, 'not yet');
        },
      });
      for (const driver of ['neon-ws', 'neon-http'] as const) {
        const db = connect({ connectionString: inject('databaseUrl'), driver, neon: local.neon });
        try {
          await migrate(db, { schema });
          const { id } = await createEnqueuer({ schema }).enqueue(db, greet, { name: driver });
          const result = await runJobs({ db, jobs: [greet], schema, logger: silentLogger });
          expect(result).toMatchObject({ claimed: 2, completed: 1, retried: 1, dead: 0 });
          expect(result.invocations.at(-1)?.claimed).toBe(0);
          expect((await getJob(db, id, { schema }))?.state).toBe('completed');
        } finally {
          await db.close();
        }
      }
      expect(seen).toEqual(['neon-ws:1', 'neon-ws:2', 'neon-http:1', 'neon-http:2']);
    } finally {
      await local.close();
    }
  });

  it('startLocalNeon on fixed ports answers where a variables file says; a port in use is named', async () => {
    const [httpPort, wsProxyPort] = [await freePort(), await freePort()];
    const local = await startLocalNeon({ httpPort, wsProxyPort });
    try {
      expect({ httpUrl: local.httpUrl, wsProxyPort: local.wsProxyPort }).toEqual({
        httpUrl: `http://127.0.0.1:${httpPort}/sql`,
        wsProxyPort,
      });
      const fetchEndpoint = `http://127.0.0.1:${httpPort}/sql`;
      const db = connect({ connectionString: inject('databaseUrl'), driver: 'neon-http', neon: { fetchEndpoint } });
      try {
        expect(await db.db.execute(sql`select 1 as one`)).toMatchObject({ rows: [{ one: 1 }] });
      } finally {
        await db.close();
      }
      await expect(startLocalNeon({ httpPort })).rejects.toThrow(`127.0.0.1:${httpPort} is in use`);
      // The WebSocket proxy's port too (ws repeats the server's error: it must not go unhandled).
      await expect(startLocalNeon({ wsProxyPort })).rejects.toThrow(`127.0.0.1:${wsProxyPort} is in use`);
    } finally {
      await local.close();
    }
  });

  it('ManualClock runs due timers in order and only when advanced', () => {
    const clock = new ManualClock(0);
    const fired: string[] = [];
    clock.setTimer(() => fired.push('b'), 20);
    clock.setTimer(() => fired.push('a'), 10);
    const cancel = clock.setTimer(() => fired.push('never'), 15);
    cancel();
    expect(clock.pending).toBe(2);
    clock.advance(9);
    expect(fired).toEqual([]);
    clock.advance(11);
    expect(fired).toEqual(['a', 'b']);
    expect(clock.now()).toBe(20);
    expect(clock.pending).toBe(0);
  });

  it('TestTime moves only forward, by milliseconds or by days, hours, minutes and seconds', () => {
    const time = new TestTime(new Date('2026-01-01T00:00:00Z'));
    expect(time.advance({ days: 7, hours: 1, minutes: 2, seconds: 3, ms: 4 }).toISOString()).toBe(
      '2026-01-08T01:02:03.004Z',
    );
    expect(time.advance(996).toISOString()).toBe('2026-01-08T01:02:04.000Z');
    expect(time.advanceTo(new Date('2026-02-01T00:00:00Z')).toISOString()).toBe('2026-02-01T00:00:00.000Z');
    expect(() => time.advanceTo(new Date('2026-01-31T23:59:59Z'))).toThrow(
      "TestTime.advanceTo: 2026-01-31T23:59:59.000Z is before the test's time (2026-02-01T00:00:00.000Z); time only moves forward",
    );
    expect(() => time.advance(-1)).toThrow('TestTime.advance: the span must be a finite number of milliseconds ≥ 0');
    expect(() => time.advance({ weeks: 1 } as never)).toThrow('TestTime.advance');
    expect(() => new TestTime(new Date('not a date'))).toThrow('TestTime: start needs a valid Date');
    expect(time.now().toISOString()).toBe('2026-02-01T00:00:00.000Z');
  });
});
