import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { ManualClock } from '../../testing/clock.js';
import { vercelConsoleClient } from '../helpers/console.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The console's overview badges a queue and kind whose ready jobs no worker served lately.
let t: TestContext;
useTestSchema('functions-console-unserved', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const ADMIN = SECRETS.SKIPLOCK_ADMIN_TOKEN;
const payload = z.object({ n: z.number() });
const mail = defineJob({ kind: 'mail', queue: 'emails', payload, handler: () => {} });
// No `queue`: on 'default', which the worker below does not serve.
const report = defineJob({ kind: 'report', payload, handler: () => {} });

/** The console's clock: fixed, never slept on. */
const now = new Date();
const consoleClient = () => vercelConsoleClient([mail, report], t.schema, ADMIN, now);

/** The overview's depth table: each body row's queue cell (text and badges) by its kind. */
function overviewRows(html: string): Record<string, { queue: string; badges: string[]; ready: string }> {
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? '';
  const rows: Record<string, { queue: string; badges: string[]; ready: string }> = {};
  for (const row of body.split('<tr>').slice(1)) {
    const cells = [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => m[1] as string);
    const text = (cell: string | undefined) => (cell ?? '').replace(/<[^>]+>/g, '').trim();
    const queueCell = cells[0] ?? '';
    const badges = [...queueCell.matchAll(/<span class="badge ([a-z]+)"[^>]*>([^<]*)<\/span>/g)].map(
      (m) => `${m[1]}:${m[2]}`,
    );
    rows[text(cells[1])] = {
      queue: text(queueCell.replace(/<span[\s\S]*?<\/span>/g, '')),
      badges,
      ready: text(cells[2]),
    };
  }
  return rows;
}

describe(`the console overview and queues no worker serves (${testDriver()})`, () => {
  it('shows a "no worker" badge on a queue and kind with ready jobs that no worker served, and only there', async () => {
    const q = enqueuerFor(t.schema);
    await q.enqueueMany(t.db, [report.with({ n: 1 }), report.with({ n: 2 }), mail.with({ n: 3 })]);
    const c = consoleClient();
    await c.login(ADMIN);

    // No worker has recorded itself yet: nothing to judge by, no badge.
    let page = await c.get('/admin/');
    expect(page.status).toBe(200);
    expect(overviewRows(page.html)).toEqual({
      mail: { queue: 'emails', badges: [], ready: '1' },
      report: { queue: 'default', badges: [], ready: '2' },
    });

    // A worker of queue 'emails' (both kinds in its code) runs, and records what it serves.
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [mail, report],
      queues: ['emails'],
      name: 'emails-worker',
      logger: silentLogger,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ completed: 1 });
    await q.enqueue(t.db, mail, { n: 4 }); // ready, on a queue a worker serves

    page = await c.get('/admin/');
    expect(page.status).toBe(200);
    expect(overviewRows(page.html)).toEqual({
      mail: { queue: 'emails', badges: [], ready: '1' },
      report: { queue: 'default', badges: ['bad:no worker'], ready: '2' },
    });
    expect(page.html).toContain('title="ready jobs, and no worker served this queue and kind in the last 10 minutes');
    // The queue's own view (?queue=default) shows it too.
    expect(overviewRows((await c.get('/admin/?queue=default')).html)).toEqual({
      report: { queue: 'default', badges: ['bad:no worker'], ready: '2' },
    });

    // A worker for every queue serves 'default' too: the badge goes.
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [report],
      logger: silentLogger,
      drain: false,
    }).runInvocation({ remainingMs: 60_000 });
    await q.enqueue(t.db, report, { n: 5 });
    expect(overviewRows((await c.get('/admin/')).html).report).toEqual({ queue: 'default', badges: [], ready: '1' });
  });

  it('shows a "no worker fits" badge on a kind whose timeout fits the invocations of no worker serving it', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [report.with({ n: 1 }), mail.with({ n: 2 })]);
    // A 15 s invocation; report's timeoutMs is the default 30 s: it never claims it.
    const quickMail = defineJob({ kind: 'mail', queue: 'emails', payload, timeoutMs: 1_000, handler: () => {} });
    const summary = await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [quickMail, report],
      logger: silentLogger,
      clock: new ManualClock(),
    }).runInvocation({ remainingMs: 15_000 });
    expect(summary).toMatchObject({ completed: 1, unfit: { budgetMs: 14_000 } });
    const c = consoleClient();
    await c.login(ADMIN);
    const page = await c.get('/admin/');
    expect(page.status).toBe(200);
    expect(overviewRows(page.html).report).toEqual({ queue: 'default', badges: ['bad:no worker fits'], ready: '1' });
    expect(page.html).toContain('(the longest has 14000 ms for attempts)');
  });
});
