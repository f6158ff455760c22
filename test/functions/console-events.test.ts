import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineEvent, subscribe, syncSubscriptions } from '../../core/events.js';
import { JobRegistry } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { vercelConsoleClient } from '../helpers/console.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { SECRETS } from '../helpers/vercel-routes.js';

// The console's events page (a "no subscriber" badge), an event's page with each subscriber's job and
// its state, and a subscriber job's page linking back to its event.
let t: TestContext;
useTestSchema('functions-console-events', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const ADMIN = SECRETS.SKIPLOCK_ADMIN_TOKEN;
const placed = defineEvent({
  name: 'order.placed',
  schema: z.object({ orderId: z.string(), card: z.string() }),
});
const receipt = subscribe(placed, { kind: 'send-receipt', sensitive: ['card'], handler: () => {} });
const fraud = subscribe(placed, {
  kind: 'fraud-check',
  maxAttempts: 1,
  handler: () => {
    throw new Error('scoring service down');
  },
});
const text = (html: string) => html.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');

describe(`the console's events (${testDriver()})`, () => {
  it('lists events with a no-subscriber badge; an event page shows each subscriber job and its state', async () => {
    const q = createEnqueuer({ schema: t.schema });
    await syncSubscriptions(t.db, new JobRegistry([receipt, fraud]), { schema: t.schema });
    const published = await q.publish(t.db, placed, { orderId: 'A-1', card: '4242424242424242' });
    const lonely = defineEvent({ name: 'order.refunded', schema: z.object({}) });
    await q.publish(t.db, lonely, {});
    await createWorker({ db: t.db, schema: t.schema, jobs: [receipt, fraud], logger: silentLogger }).runInvocation({
      remainingMs: 60_000,
    });

    const c = vercelConsoleClient([receipt, fraud], t.schema, ADMIN, new Date());
    await c.login(ADMIN);
    const list = await c.get('/admin/events');
    expect(list.status).toBe(200);
    const rows = /<tbody>([\s\S]*?)<\/tbody>/.exec(list.html)?.[1]?.split('<tr>').slice(1) ?? [];
    expect(rows.map((r) => text(r).trim())).toEqual([
      expect.stringMatching(/^#\d+ order\.refunded .* no subscriber 0$/),
      expect.stringMatching(/^#\d+ order\.placed .* 2 2$/),
    ]);
    const only = await c.get('/admin/events?unsubscribed=1');
    expect(text(only.html)).not.toContain('order.placed ');

    const page = await c.get(`/admin/events/${published.eventId}`);
    expect(page.status).toBe(200);
    const body = text(page.html);
    expect(body).toMatch(/fraud-check #\d+ dead max_attempts 1/);
    expect(body).toMatch(/send-receipt #\d+ completed 1/);
    // The card number a subscriber marks sensitive is masked in the event's payload.
    expect(page.html).not.toContain('4242424242424242');

    const fraudJob = published.jobs.find((j) => j.kind === 'fraud-check')?.id as string;
    const jobPage = await c.get(`/admin/jobs/${fraudJob}`);
    expect(jobPage.html).toContain(`href="/admin/events/${published.eventId}"`);
    expect((await c.get('/admin/events/999999')).status).toBe(404);
  });
});
