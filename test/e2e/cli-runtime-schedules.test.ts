import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXIT } from '../../cli/run.js';
import { cliOn } from '../helpers/cli.js';

// `skiplock schedules` for schedules created at run time: create, list beside the code's, show,
// pause, resume, delete.
const schema = `cli_rs_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;
const cli = cliOn(schema);
const JOBS = ['--jobs', 'test/helpers/cli-jobs.ts'];

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  expect((await cli('migrate')).code).toBe(EXIT.ok);
});
afterAll(async () => {
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock schedules: run-time schedules', () => {
  it('creates one (payload checked by the kind), lists it beside the code schedules, pauses, resumes, deletes', async () => {
    const bad = await cli(
      'schedules',
      'create',
      'ping:user-1',
      'ping',
      '--cron',
      '*/15 * * * *',
      '--payload',
      '{"n":"x"}',
      ...JOBS,
    );
    expect(bad.code).not.toBe(EXIT.ok);
    expect(bad.err).toMatch(/ping/);
    expect((await cli('schedules', 'create', 'ping:user-1', 'ping', '--cron', '*/15 * * * *')).code).toBe(EXIT.config);
    const created = await cli(
      'schedules',
      'create',
      'ping:user-1',
      'ping',
      '--cron',
      '*/15 * * * *',
      '--timezone',
      'Europe/Berlin',
      '--payload',
      '{"n":1}',
      ...JOBS,
    );
    expect(created).toMatchObject({ code: EXIT.ok });
    expect(created.out).toMatch(/^created schedule ping:user-1, next run /);
    const again = await cli(
      'schedules',
      'create',
      'ping:user-1',
      'ping',
      '--every',
      '60000',
      '--payload',
      '{"n":2}',
      ...JOBS,
    );
    expect(again.code).toBe(EXIT.refused);
    expect(again.out).toMatch(/exists: nothing written/);
    const replaced = await cli(
      'schedules',
      'create',
      'ping:user-1',
      'ping',
      '--every',
      '900000',
      '--payload',
      '{"n":2}',
      '--replace',
      ...JOBS,
    );
    expect(replaced.out).toMatch(/^updated schedule ping:user-1/);

    const listed = (await cli('schedules', ...JOBS)).out;
    expect(listed).toMatch(/ping-hourly\s+0 \* \* \* \*\s+UTC\s+ping\s+not recorded yet\s+.*code/);
    expect(listed).toMatch(/ping:user-1\s+every 15m\s+UTC\s+ping\s+.*runtime/);

    const shown = JSON.parse((await cli('schedules', 'show', 'ping:user-1', '--json')).out);
    expect(shown).toMatchObject({
      key: 'ping:user-1',
      kind: 'ping',
      intervalMs: 900000,
      payload: { n: 2 },
      version: 2,
    });

    expect((await cli('schedules', 'pause', 'ping:user-1')).out).toBe('paused schedule ping:user-1');
    expect((await cli('schedules', 'pause', 'ping:user-1')).code).toBe(EXIT.refused);
    expect((await cli('schedules')).out).toMatch(/ping:user-1\s+every 15m.*paused since/);
    expect((await cli('schedules', 'resume', 'ping:user-1')).code).toBe(EXIT.ok);
    const json = JSON.parse((await cli('schedules', '--json')).out) as {
      name: string;
      source: string;
      pausedAt: unknown;
    }[];
    expect(json).toEqual([expect.objectContaining({ name: 'ping:user-1', source: 'runtime', pausedAt: null })]);
    // Created 16 minutes ago, as far as it knows: its first run (every 15 minutes) is due.
    await admin.query(
      `update "${schema}".runtime_schedules set created_at = now() - interval '16 minutes', next_run_at = now() - interval '1 minute'`,
    );
    const ticked = await cli('schedules', 'tick');
    expect(ticked.code).toBe(EXIT.ok);
    const jobs = await admin.query(`select kind, dedupe_key from "${schema}".jobs`);
    expect(jobs.rows.map((r) => r.kind)).toEqual(['ping']);
    expect(ticked.out).toBe(`enqueued ${jobs.rows[0].dedupe_key.replace('@', ' @ ')} as job 1`);
    expect((await cli('schedules', 'delete', 'ping:user-1')).out).toBe('deleted schedule ping:user-1');
    expect((await cli('schedules', 'show', 'ping:user-1')).code).toBe(EXIT.refused);
    expect((await cli('schedules', 'delete')).code).toBe(EXIT.usage);
  });
});
