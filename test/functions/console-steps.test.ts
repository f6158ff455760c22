import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker.js';
import { vercelConsoleClient } from '../helpers/console.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The console's overview counts the jobs asleep in a durable step and those waiting for a signal.
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

/** The console's clock: fixed, never slept on. */
const now = new Date();
const consoleClient = () => vercelConsoleClient([sleeper, waiter], t.schema, ADMIN, now);

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
});
