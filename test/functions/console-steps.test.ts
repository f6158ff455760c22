import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatTime } from '../../adapters/console/html.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { vercelConsoleClient } from '../helpers/console.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The console's overview counts the jobs asleep in a durable step and those waiting for a signal;
// a job's page says until when it sleeps or waits, and names no holder for a queued job.
let t: TestContext;
useTestSchema('functions-console-steps', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const ADMIN = SECRETS.SKIPLOCK_ADMIN_TOKEN;
const payload = z.object({ n: z.number() });
const sleeper = defineJob({
  kind: 'drip-sleeper',
  queue: 'drip',
  payload,
  handler: async (_p, ctx) => {
    await ctx.step('welcome', () => 'sent');
    await ctx.sleep('settle-in', 3 * 86_400_000);
  },
});
const waiter = defineJob({
  kind: 'drip-waiter',
  queue: 'drip',
  payload,
  handler: async (p, ctx) => {
    await ctx.waitForSignal('activated', { key: `activate:${p.n}`, timeoutMs: 86_400_000 });
  },
});

// Sleeps 0 ms, then fails: back in the queue for its retry, an hour later, with a sleep as its last step.
const napThenFail = defineJob({
  kind: 'nap-then-fail',
  queue: 'drip',
  payload,
  backoff: { type: 'constant', delayMs: 3_600_000 },
  handler: async (_p, ctx) => {
    await ctx.sleep('nap', 0);
    throw new Error('the mail server is down');
  },
});

/** The console's clock: fixed, never slept on. */
const now = new Date();
const consoleClient = () => vercelConsoleClient([sleeper, waiter, napThenFail], t.schema, ADMIN, now);

/** The steps table of a job's page: each row's cells (their text), in order. */
function stepRows(html: string): string[][] {
  const text = (cell: string) =>
    cell
      .replace(/<[^>]+>/g, '')
      .replace(/\s+/g, ' ')
      .trim();
  const table = /<h2>Steps[\s\S]*?<tbody>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? '';
  return table
    .split('<tr>')
    .slice(1)
    .map((row) => [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => text(m[1] as string)));
}
/** The `<dd>` after `<dt>name</dt>` on a job's page, as text. */
const field = (html: string, name: string) =>
  (new RegExp(`<dt>${name}</dt><dd>([\\s\\S]*?)</dd>`).exec(html)?.[1] ?? '').replace(/<[^>]+>/g, '').trim();
/** The timeline's last entry (where the job is now), as text. */
const nowEntry = (html: string) =>
  (/<ol class="timeline">[\s\S]*<li[^>]*>([\s\S]*?)<\/li><\/ol>/.exec(html)?.[1] ?? '')
    .replace(/<[^>]+>/g, '')
    .replace(/\s+/g, ' ')
    .trim();

/** The overview's depth table: each body row's cells (their text) by column header, keyed by kind. */
function depthTable(html: string): Record<string, Record<string, string>> {
  const text = (cell: string) => cell.replace(/<[^>]+>/g, '').trim();
  const head = /<thead>([\s\S]*?)<\/thead>/.exec(html)?.[1] ?? '';
  const columns = [...head.matchAll(/<th[^>]*>([\s\S]*?)<\/th>/g)].map((m) => text(m[1] as string));
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? '';
  const rows: Record<string, Record<string, string>> = {};
  for (const row of body.split('<tr>').slice(1)) {
    const cells = [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => text(m[1] as string));
    const named = Object.fromEntries(cells.map((cell, i) => [columns[i] ?? `#${i}`, cell]));
    rows[named.Kind as string] = named;
  }
  return rows;
}

describe(`the console's overview and durable steps (${testDriver()})`, () => {
  it('counts the jobs sleeping in a step and those waiting for a signal, per queue and kind', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      sleeper.with({ n: 1 }),
      sleeper.with({ n: 2 }),
      waiter.with({ n: 3 }),
    ]);
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [sleeper, waiter],
      logger: silentLogger,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ suspended: 3, completed: 0 });
    const c = consoleClient();
    await c.login(ADMIN);
    const page = await c.get('/admin/');
    expect(page.status).toBe(200);
    expect(page.html).toContain('<th class="n" title="in a durable sleep (ctx.sleep)">Sleeping</th>');
    const rows = depthTable(page.html);
    // Asleep or waiting, they are among the scheduled jobs too (queued, due later); none is ready.
    expect(rows['drip-sleeper']).toMatchObject({
      Queue: 'drip',
      Ready: '0',
      Scheduled: '2',
      Sleeping: '2',
      'For signal': '0',
    });
    expect(rows['drip-waiter']).toMatchObject({
      Queue: 'drip',
      Ready: '0',
      Scheduled: '1',
      Sleeping: '0',
      'For signal': '1',
    });
    // A signal wakes the waiter: once it is done, it is counted nowhere.
    expect((await enqueuerFor(t.schema).signal(t.db, 'activate:3', { ok: true })).woken).toBe(1);
    await createWorker({ db: t.db, schema: t.schema, jobs: [waiter], logger: silentLogger }).runInvocation({
      remainingMs: 60_000,
    });
    const after = depthTable((await c.get('/admin/')).html);
    expect(after['drip-waiter']).toMatchObject({ Scheduled: '0', Sleeping: '0', 'For signal': '0' });
    expect(after['drip-sleeper']).toMatchObject({ Sleeping: '2', 'For signal': '0' });
  });

  it("a job's page says until when its sleep or its wait lasts, names no lease holder, and does not call a retry after a sleep sleeping", async () => {
    const [asleep, waiting, retrying] = (
      await enqueuerFor(t.schema).enqueueMany(t.db, [
        sleeper.with({ n: 1 }),
        waiter.with({ n: 2 }),
        napThenFail.with({ n: 3 }),
      ])
    ).map((r) => r.id) as [string, string, string];
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [sleeper, waiter, napThenFail],
      logger: silentLogger,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ retried: 1 });
    const times = async (id: string) =>
      (
        await t.admin.query(
          `select j.run_at, s.timeout_at from "${t.schema}".jobs j
          join "${t.schema}".job_steps s on s.job_id = j.id and s.type <> 'run' where j.id = $1`,
          [id],
        )
      ).rows[0] as { run_at: Date; timeout_at: Date };
    const c = consoleClient();
    await c.login(ADMIN);

    const nap = (await c.get(`/admin/jobs/${asleep}`)).html;
    const wakeAt = formatTime((await times(asleep)).run_at);
    // The step's duration is the worker's own measure (0 or 1 ms, as the machine is loaded): the page shows the row's.
    const welcome = await t.admin.query(
      `select duration_ms from "${t.schema}".job_steps where job_id = $1 and name = 'welcome'`,
      [asleep],
    );
    expect(stepRows(nap)).toEqual([
      [
        '1',
        'welcome',
        'run',
        'completed',
        '1',
        `${welcome.rows[0].duration_ms} ms`,
        '6 B',
        expect.stringMatching(/Z$/),
        '',
      ],
      ['2', 'settle-in', 'sleep', `sleeping until ${wakeAt}`, '1', '–', '–', '–', ''],
    ]);
    expect(nowEntry(nap)).toMatch(new RegExp(`^sleeping until ${wakeAt} \\(step settle-in\\) · ${wakeAt}`));
    expect(field(nap, 'Lease')).toMatch(/^none \(last held by [0-9a-f-]{36}\)$/);

    const wait = (await c.get(`/admin/jobs/${waiting}`)).html;
    const timeoutAt = formatTime((await times(waiting)).timeout_at);
    expect(stepRows(wait)).toEqual([
      ['1', 'activated', 'signal', `waiting for signal activate:2 until ${timeoutAt}`, '1', '–', '–', '–', ''],
    ]);
    expect(nowEntry(wait)).toMatch(
      new RegExp(`^waiting for signal activate:2 until ${timeoutAt} \\(step activated\\)`),
    );
    expect(field(wait, 'Lease')).toMatch(/^none \(last held by [0-9a-f-]{36}\)$/);

    // Its sleep is over; it waits for its retry.
    const retry = (await c.get(`/admin/jobs/${retrying}`)).html;
    expect(stepRows(retry)[0]?.slice(0, 4)).toEqual(['1', 'nap', 'sleep', 'completed']);
    expect(nowEntry(retry)).toMatch(/^queued for attempt 2 · /);
  });
});
