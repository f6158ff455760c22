import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelConsole } from '../../adapters/vercel.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createScheduler } from '../../core/runtime-schedules.js';
import { defineSchedule, runSchedules } from '../../core/schedules.js';
import { ConsoleClient } from '../helpers/console.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The console's schedules page: code and run-time schedules in one list; pause, resume and delete
// for run-time ones, refused to a read-only session.
let t: TestContext;
useTestSchema('functions-console-schedules', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const ADMIN = SECRETS.SKIPLOCK_ADMIN_TOKEN;
const VIEWER = 'viewer-token-0123456789abcdef';
const digest = defineJob({ kind: 'digest', payload: z.object({ userId: z.string() }), handler: () => {} });
const now = new Date();
const env = {
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: '',
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_ADMIN_TOKEN: ADMIN,
  SKIPLOCK_CONSOLE_VIEWER_TOKEN: VIEWER,
  VERCEL: '1',
};
const client = () =>
  new ConsoleClient(createVercelConsole([digest], { env: { ...env, SKIPLOCK_SCHEMA: t.schema }, now: () => now }));

/** The schedules table: each row's cells as text, by name. */
function scheduleRows(html: string): Record<string, string[]> {
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? '';
  const rows: Record<string, string[]> = {};
  for (const row of body.split('<tr>').slice(1)) {
    const cells = [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) =>
      (m[1] as string)
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    );
    rows[cells[0] as string] = cells.slice(1);
  }
  return rows;
}

describe(`the console's schedules page (${testDriver()})`, () => {
  it('lists both kinds; pauses, resumes and deletes a run-time schedule through a confirmed form', async () => {
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', job: digest, payload: { userId: 'n' } });
    await runSchedules(t.db, [nightly], { schema: t.schema, logger: silentLogger });
    await createScheduler({ schema: t.schema }).createSchedule(t.db, {
      key: 'digest:user-42',
      job: digest,
      everyMs: 900_000,
      payload: { userId: '42' },
    });
    const c = client();
    await c.login(ADMIN);
    let page = await c.get('/admin/schedules');
    expect(page.status).toBe(200);
    const rows = scheduleRows(page.html);
    expect(Object.keys(rows)).toEqual(['digest:user-42', 'nightly']);
    expect(rows['digest:user-42']?.slice(0, 4)).toEqual(['runtime', 'every 15m', 'UTC', 'digest']);
    expect(rows['digest:user-42']?.at(-1)).toBe('Pause Delete');
    expect(rows.nightly?.slice(0, 2)).toEqual(['database', '0 3 * * *']);
    expect(rows.nightly?.at(-1)).toBe('');

    const confirm = await c.post('/admin/actions', { csrf: c.csrf, action: 'schedule_pause', key: 'digest:user-42' });
    expect(confirm.html).toMatch(/Pause the schedule <strong>digest:user-42<\/strong>\?/);
    expect((await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-42'))?.pausedAt).toBeNull();
    const done = await c.post('/admin/actions', {
      csrf: c.csrf,
      action: 'schedule_pause',
      key: 'digest:user-42',
      confirmed: '1',
    });
    expect(done.html).toMatch(/Paused schedule digest:user-42/);
    page = await c.get('/admin/schedules');
    expect(scheduleRows(page.html)['digest:user-42']?.slice(0, 2)).toEqual(['runtime paused', 'every 15m']);
    expect(scheduleRows(page.html)['digest:user-42']?.at(-1)).toBe('Resume Delete');

    await c.post('/admin/actions', { csrf: c.csrf, action: 'schedule_resume', key: 'digest:user-42', confirmed: '1' });
    expect((await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-42'))?.pausedAt).toBeNull();
    const deleted = await c.post('/admin/actions', {
      csrf: c.csrf,
      action: 'schedule_delete',
      key: 'digest:user-42',
      confirmed: '1',
    });
    expect(deleted.html).toMatch(/Deleted schedule digest:user-42/);
    expect(await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-42')).toBeNull();
  });

  it('a read-only session sees the page without the forms, and its posted action is refused', async () => {
    await createScheduler({ schema: t.schema }).createSchedule(t.db, {
      key: 'digest:user-7',
      job: digest,
      cron: '0 9 * * 1',
      payload: { userId: '7' },
    });
    const viewer = client();
    await viewer.login(VIEWER);
    const page = await viewer.get('/admin/schedules');
    expect(scheduleRows(page.html)['digest:user-7']?.at(-1)).toBe('');
    const refused = await viewer.post('/admin/actions', {
      csrf: viewer.csrf,
      action: 'schedule_delete',
      key: 'digest:user-7',
      confirmed: '1',
    });
    expect(refused.status).toBe(403);
    expect(await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-7')).not.toBeNull();
  });
});
