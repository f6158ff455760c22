import { afterEach, describe, expect, it } from 'vitest';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelEnqueue, createVercelMaintenance, createVercelWorker } from '../../adapters/vercel.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { email, ROUTES, routeRequest, SECRETS, tick } from '../helpers/vercel-routes.js';

let t: TestContext;

useTestSchema('functions-vercel', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  SKIPLOCK_MAX_DURATION_MS: '10000',
  ...SECRETS,
  ...extra,
});
const count = async () =>
  (await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`)).rows[0].n as number;
type Body = {
  error: { code: string; message: string };
  results: { id: string; outcome: string }[];
  flow: Record<string, { id: string; outcome: string }>;
};
const json = async (response: Response): Promise<Body> => (await response.json()) as Body;

describe.each(ROUTES)(`Vercel $name route (${testDriver()})`, (route) => {
  it('200 with the right token', async () => {
    const response = await route.make(env())(routeRequest(route, `Bearer ${SECRETS[route.secret]}`));
    expect(response.status).toBe(200);
  });
});

describe(`Vercel enqueue body checks (${testDriver()})`, () => {
  const route = ROUTES[0]!;
  const auth = `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`;

  it.each([
    ['malformed JSON', { body: '{"kind":' }, 400, /not valid JSON/],
    [
      'wrong content type',
      { body: '{}', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      400,
      /content-type/,
    ],
    ['unknown kind', { body: JSON.stringify({ kind: 'fax', payload: {} }) }, 400, /unknown job kind "fax"/],
    [
      'invalid payload',
      { body: JSON.stringify({ kind: 'send-email', payload: { to: 1 } }) },
      400,
      /invalid payload for send-email/,
    ],
    [
      'payload over its limit',
      { body: JSON.stringify({ kind: 'send-email', payload: { ...email, body: 'x'.repeat(300_000) } }) },
      413,
      /over the 262144-byte limit/,
    ],
    ['oversized body', { body: 'x'.repeat(1_100_000) }, 413, /over the 1048576-byte limit/],
  ])('%s → %i, nothing written', async (_name, init, status, message) => {
    const response = await route.make(env())(routeRequest(route, auth, init));
    expect(response.status).toBe(status);
    expect((await json(response)).error.message).toMatch(message);
    expect(await count()).toBe(0);
  });

  it('413 for an oversized streamed body with no content-length, before parsing', async () => {
    const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent++;
        if (sent > 40) controller.close();
        else controller.enqueue(chunk);
      },
    });
    const req = new Request('https://app.example.com/api/enqueue', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    const response = await route.make(env())(req);
    expect(response.status).toBe(413);
    expect(sent).toBeLessThan(40); // it stopped reading once over the limit
    expect(await count()).toBe(0);
  });

  it('a batch answers with ids and dedupe outcomes', async () => {
    const body = JSON.stringify({
      jobs: [
        { kind: 'send-email', payload: email, options: { dedupe: { key: 'k1' } } },
        { kind: 'send-email', payload: email, options: { dedupe: { key: 'k1' } } },
      ],
    });
    const response = await route.make(env())(routeRequest(route, auth, { body }));
    expect(response.status).toBe(200);
    const { results } = await json(response);
    expect(results.map((r: { outcome: string }) => r.outcome)).toEqual(['inserted', 'deduplicated']);
    expect(results[0]?.id).toBe(results[1]?.id);
  });

  it('a flow answers with each step by name; a child waits for its parent; a bad step name is a 400', async () => {
    const body = JSON.stringify({
      flow: {
        first: { kind: 'send-email', payload: email },
        next: { kind: 'send-email', payload: email, options: { after: ['first'], onParentFailure: 'run' } },
      },
    });
    const response = await route.make(env())(routeRequest(route, auth, { body }));
    expect(response.status).toBe(200);
    const { flow } = await json(response);
    expect(Object.keys(flow)).toEqual(['first', 'next']);
    const { rows } = await t.admin.query(`select after::text[] as after from "${t.schema}".jobs where id = $1`, [
      flow.next?.id,
    ]);
    expect(rows[0].after).toEqual([flow.first?.id]);
    const bad = JSON.stringify({
      flow: { first: { kind: 'send-email', payload: email, options: { after: ['nope'] } } },
    });
    const refused = await route.make(env())(routeRequest(route, auth, { body: bad }));
    expect(refused.status).toBe(400);
    expect((await json(refused)).error).toMatchObject({
      code: 'invalid_options',
      message: expect.stringMatching(/"nope" is not a job id or the name of another step/),
    });
    expect(await count()).toBe(2);
  });
});

describe(`Vercel worker cron (${testDriver()})`, () => {
  it('runs an invocation within SKIPLOCK_MAX_DURATION_MS and answers with the summary', async () => {
    await createVercelEnqueue([tick], { env: env() })(
      new Request('https://app.example.com/api/enqueue', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` },
        body: JSON.stringify({
          jobs: [
            { kind: 'tick', payload: {} },
            { kind: 'tick', payload: {} },
          ],
        }),
      }),
    );
    const response = await createVercelWorker([tick], { env: env() })(
      new Request('https://app.example.com/api/worker', {
        headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
      }),
    );
    expect(response.status).toBe(200);
    expect(await json(response)).toMatchObject({ claimed: 2, completed: 2, stoppedBecause: 'drained' });
  });
});

describe(`Vercel worker and maintenance routes when the database is down (${testDriver()})`, () => {
  it('answer 503 with the summary or the error, never 200: cron dashboards and uptime checks see the failure', async () => {
    // A port nothing listens on: every connection is refused.
    const down = env({ DATABASE_URL: 'postgres://skiplock:secret-password@127.0.0.1:9/app' });
    const request = (path: string) =>
      new Request(`https://app.example.com${path}`, { headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` } });
    const worker = await createVercelWorker([tick], { env: down })(request('/api/worker'));
    expect(worker.status).toBe(503);
    const summary = (await worker.json()) as Record<string, unknown>;
    expect(summary).toMatchObject({ stoppedBecause: 'error', claimed: 0 });
    expect(JSON.stringify(summary)).not.toContain('secret-password');
    await resetSharedRuntime();
    const maintenance = await createVercelMaintenance({ env: down })(request('/api/maintenance'));
    expect(maintenance.status).toBe(503);
    expect(JSON.stringify(await maintenance.json())).not.toContain('secret-password');
  });
});
