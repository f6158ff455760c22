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

  it("creates and replaces a run-time schedule from a form, the payload checked by the kind's schema", async () => {
    const c = client();
    await c.login(ADMIN);
    const page = await c.get('/admin/schedules');
    expect(page.html).toMatch(/<form[^>]*action="\/admin\/actions"[^>]*>[\s\S]*name="action" value="schedule_save"/);
    expect(page.html).toMatch(/<option value="digest">digest<\/option>/);
    const fields = {
      csrf: c.csrf,
      action: 'schedule_save',
      key: 'digest:user-9',
      kind: 'digest',
      cron: '0 9 * * 1',
      every: '',
      timezone: 'Europe/Berlin',
      payload: '{"userId":"9"}',
    };
    const confirm = await c.post('/admin/actions', fields);
    expect(confirm.html).toMatch(/Save the schedule <strong>digest:user-9<\/strong>/);
    expect(await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-9')).toBeNull();
    const done = await c.post('/admin/actions', { ...fields, confirmed: '1' });
    expect(done.html).toMatch(/Created schedule digest:user-9/);
    const saved = await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-9');
    expect([saved?.cron, saved?.timezone, saved?.payload]).toEqual(['0 9 * * 1', 'Europe/Berlin', { userId: '9' }]);
    // The same key again replaces it: an interval now, in UTC.
    const replaced = await c.post('/admin/actions', {
      ...fields,
      cron: '',
      every: '3600',
      timezone: '',
      confirmed: '1',
    });
    expect(replaced.html).toMatch(/Updated schedule digest:user-9/);
    const again = await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-9');
    expect([again?.cron, again?.intervalMs, again?.timezone]).toEqual([null, 3_600_000, 'UTC']);
    // A payload the kind's schema refuses, bad JSON and an unknown kind change nothing.
    for (const bad of [
      { payload: '{"userId":9}', error: /payload/ },
      { payload: '{', error: /payload is not JSON/ },
      { kind: 'nope', error: /unknown kind nope/ },
    ]) {
      const { error, ...change } = bad;
      const res = await c.post('/admin/actions', { ...fields, key: 'digest:user-10', ...change, confirmed: '1' });
      expect(res.status).toBe(400);
      expect(res.html).toMatch(error);
    }
    expect(await createScheduler({ schema: t.schema }).getSchedule(t.db, 'digest:user-10')).toBeNull();
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
    expect(page.html).not.toMatch(/schedule_save/);
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
