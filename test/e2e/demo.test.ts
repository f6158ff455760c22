import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';
import { expect, inject, it } from 'vitest';

const run = promisify(execFile);

it('the demo (npm run demo --quiet) drains a realistic mix, replays its DLQ, and every job ends completed', async () => {
  const schema = `demo_${randomBytes(4).toString('hex')}`;
  const url = inject('databaseUrl');
  try {
    const { stdout } = await run('npx', ['tsx', 'scripts/demo.ts', '--quiet'], {
      env: { ...process.env, DATABASE_URL: url, SKIPLOCK_SCHEMA: schema },
      timeout: 90_000,
    });
    const result = JSON.parse(stdout.trim().split('\n').at(-1) as string);
    // 35 distinct e-mails (5 duplicates deduplicated), 60 webhooks, 5 reports.
    expect(result).toMatchObject({
      enqueued: 100,
      deduplicated: 5,
      emailsSent: 35,
      webhooksAccepted: 60,
      badSignatures: 0,
    });
    // Before the replay every job is completed or dead; the gone (410) and down (503) endpoints died.
    expect(result.beforeReplay.completed + result.beforeReplay.dead).toBe(100);
    expect(result.beforeReplay.deadReasons.http_410).toBe(3); // the receiver is gone: deliverWebhook's 410
    expect(result.beforeReplay.deadReasons.max_attempts).toBeGreaterThanOrEqual(3);
    expect(result.beforeReplay.failedAttempts).toBeGreaterThan(0);
    // The replay brought every dead job back, and they completed.
    expect(result.replayed).toBe(result.beforeReplay.dead);
    expect(result.afterReplay).toEqual({ completed: 100, dead: 0, total: 100 });
  } finally {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`drop schema if exists "${schema}" cascade`);
    await client.end();
  }
});
