// skiplock/testing, used as an application's tests would use it.
import pg from 'pg';
import { connect, createEnqueuer, defineJob, getJob, migrate, RetryAfterError, silentLogger } from 'skiplock';
import { ManualClock, runJobs, startLocalNeon } from 'skiplock/testing';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';

const schema = `testing_${process.pid}`;
afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await admin.end();
});

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
});
