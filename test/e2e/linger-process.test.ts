import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';

const schema = `t_linger_alone_${process.env.SKIPLOCK_TEST_RUN ?? ''}`.replace(/[^a-z0-9_]/g, '_');

afterAll(async () => {
  const admin = new pg.Client({ connectionString: inject('databaseUrl') });
  await admin.connect();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('a lingering invocation alone in its process', () => {
  it('keeps the process alive until its linger ends, then returns drained', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/linger-alone.ts'], {
      env: { ...process.env, DATABASE_URL: inject('databaseUrl'), SKIPLOCK_SCHEMA: schema },
      encoding: 'utf8',
      timeout: 60_000,
    });
    // Exit 13 (an unsettled top-level await) with no output is what an unref'd linger timer gave.
    expect(run.status, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout.trim().split('\n').pop() as string);
    expect(summary).toMatchObject({ claimed: 1, completed: 1, stoppedBecause: 'drained' });
    // It lingered its whole 300 ms, on its clock: three looks 100 ms apart, each wait kept alive.
    expect([summary.clockMs, summary.durationMs]).toEqual([300, 300]);
    expect(summary.fired).toEqual([100, 100, 100].map((ms) => ({ ms, keepAlive: true })));
  });
});
