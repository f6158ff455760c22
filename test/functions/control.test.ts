import { afterEach, describe, expect, it } from 'vitest';
import { createLambdaControl } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelControl } from '../../adapters/vercel.js';
import { claimJobs } from '../../db/statements/claim.js';
import { httpApiEvent, lambdaContext } from '../../testing/events.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor, sendEmail } from '../helpers/kinds.js';
import { SECRETS } from '../helpers/vercel-routes.js';

let t: TestContext;
useTestSchema('functions-control', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'info',
  ...SECRETS,
  ...extra,
});
const adminAuth = { authorization: `Bearer ${SECRETS.SKIPLOCK_ADMIN_TOKEN}` };
const claimEmails = async () =>
  (
    await claimJobs(t.db.executor, t.schema, {
      leases: [{ kind: 'send-email', leaseMs: 30_000 }],
      limit: 10,
      invocationId: 'inv',
    })
  ).jobs.map((j) => j.queue);
const vercel = (body: unknown, headers: Record<string, string> = adminAuth, extraEnv = {}) =>
  createVercelControl({ env: env(extraEnv) })(
    new Request('https://app.example.com/api/control', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }),
  );

describe(`the control function (${testDriver()})`, () => {
  it('Vercel: pause holds a queue back for every claim, list shows it, resume releases it', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      sendEmail.with({ to: 'a@example.com', subject: 's' }, { queue: 'webhooks' }),
      sendEmail.with({ to: 'b@example.com', subject: 's' }, { queue: 'emails' }),
    ]);
    const paused = await vercel({ action: 'pause', queue: 'webhooks', reason: 'partner down', by: 'ada' });
    expect(paused.status).toBe(200);
    expect(await paused.json()).toMatchObject({
      action: 'pause',
      changed: true,
      paused: { scope: 'queue', name: 'webhooks', pausedBy: 'ada', reason: 'partner down' },
    });
    expect(await claimEmails()).toEqual(['emails']);
    const listed = (await (await vercel({ action: 'list' })).json()) as { paused: { name: string }[] };
    expect(listed.paused.map((p) => p.name)).toEqual(['webhooks']);
    const resumed = await vercel({ action: 'resume', queue: 'webhooks' });
    expect(await resumed.json()).toMatchObject({ action: 'resume', resumed: true, pause: { name: 'webhooks' } });
    expect(await claimEmails()).toEqual(['webhooks']);
  });

  it('Vercel: limit caps a queue for every claim from the next one, limits lists it with what runs, unlimit clears it', async () => {
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 5 }, (_, i) =>
        sendEmail.with({ to: `u${i}@example.com`, subject: 's' }, { queue: 'webhooks' }),
      ),
    );
    const set = await vercel({ action: 'limit', queue: 'webhooks', maxRunning: 2, reason: 'partner rate', by: 'ada' });
    expect(set.status).toBe(200);
    expect(await set.json()).toMatchObject({
      action: 'limit',
      previous: null,
      limit: { scope: 'queue', name: 'webhooks', maxRunning: 2, setBy: 'ada', reason: 'partner rate' },
    });
    expect(await claimEmails()).toEqual(['webhooks', 'webhooks']);
    const listed = (await (await vercel({ action: 'limits' })).json()) as { limits: unknown[] };
    expect(listed.limits).toEqual([expect.objectContaining({ name: 'webhooks', maxRunning: 2, running: 2 })]);
    const perKey = await vercel({ action: 'limit', queue: 'webhooks', perKey: true, maxRunning: 1 });
    expect(await perKey.json()).toMatchObject({ limit: { scope: 'key', name: 'webhooks', maxRunning: 1 } });
    const cleared = await vercel({ action: 'unlimit', queue: 'webhooks' });
    expect(await cleared.json()).toMatchObject({ action: 'unlimit', cleared: true, limit: { maxRunning: 2 } });
    expect(await claimEmails()).toEqual(['webhooks', 'webhooks', 'webhooks']);
  });

  it('Vercel: breakers lists an open breaker, reset_breaker closes it and its jobs are claimed again', async () => {
    await enqueuerFor(t.schema).enqueueMany(t.db, [
      sendEmail.with({ to: 'a@example.com', subject: 's' }, { destination: 'down.example' }),
      sendEmail.with({ to: 'b@example.com', subject: 's' }, { destination: 'up.example' }),
    ]);
    await t.admin.query(
      `insert into "${t.schema}".destinations (name, state, opened_at, open_until, trips)
       values ('down.example', 'open', now(), now() + interval '1 hour', 1)`,
    );
    const listed = (await (await vercel({ action: 'breakers' })).json()) as { breakers: unknown[] };
    expect(listed.breakers).toEqual([expect.objectContaining({ name: 'down.example', state: 'open', trips: 1 })]);
    const reset = await vercel({ action: 'reset_breaker', destination: 'down.example', by: 'ada' });
    expect(reset.status).toBe(200);
    expect(await reset.json()).toEqual({ action: 'reset_breaker', destination: 'down.example', previous: 'open' });
    expect(await claimEmails()).toEqual(['emails', 'emails']);
    const unknown = await vercel({ action: 'reset_breaker', destination: 'nobody.example' });
    expect(await unknown.json()).toEqual({ action: 'reset_breaker', destination: 'nobody.example', previous: null });
    const bad = await vercel({ action: 'reset_breaker', destination: '' });
    expect(bad.status).toBe(400);
  });

  it('Vercel: set_rate_limit holds a destination to its rate from the next claim, rate_limits lists it in use, clear_rate_limit clears it', async () => {
    await enqueuerFor(t.schema).enqueueMany(
      t.db,
      Array.from({ length: 5 }, (_, i) =>
        sendEmail.with({ to: `u${i}@example.com`, subject: 's' }, { destination: 'api.partner.example' }),
      ),
    );
    const set = await vercel({
      action: 'set_rate_limit',
      destination: 'api.partner.example',
      limit: 2,
      periodMs: 60_000,
      reason: 'their quota',
      by: 'ada',
    });
    expect(set.status).toBe(200);
    expect(await set.json()).toMatchObject({
      action: 'set_rate_limit',
      previous: null,
      rateLimit: { scope: 'destination', name: 'api.partner.example', maxStarts: 2, periodMs: 60_000, setBy: 'ada' },
    });
    expect(await claimEmails()).toEqual(['emails', 'emails']);
    expect(await claimEmails()).toEqual([]);
    const listed = (await (await vercel({ action: 'rate_limits' })).json()) as {
      rateLimits: unknown[];
      use: unknown[];
    };
    expect(listed.rateLimits).toEqual([expect.objectContaining({ name: 'api.partner.example', maxStarts: 2 })]);
    expect(listed.use).toEqual([
      expect.objectContaining({ scope: 'destination', name: 'api.partner.example', used: 2 }),
    ]);
    const cleared = await vercel({ action: 'clear_rate_limit', destination: 'api.partner.example' });
    expect(await cleared.json()).toMatchObject({
      action: 'clear_rate_limit',
      cleared: true,
      rateLimit: { maxStarts: 2 },
    });
    expect(await claimEmails()).toEqual(['emails', 'emails', 'emails']);
  });

  it.each([
    ['a rate of 0', { action: 'set_rate_limit', queue: 'q', limit: 0 }, /invalid request/],
    ['a period under a second', { action: 'set_rate_limit', queue: 'q', limit: 5, periodMs: 500 }, /invalid request/],
    ['no target', { action: 'set_rate_limit', limit: 5 }, /exactly one of queue, kind or destination/],
    ['two targets', { action: 'set_rate_limit', queue: 'q', destination: 'd', limit: 5 }, /exactly one of/],
    ['a per-key rate on a kind', { action: 'set_rate_limit', kind: 'k', perKey: true, limit: 5 }, /set on a queue/],
  ])('Vercel: 400 for %s, no rate stored', async (_label, body, message) => {
    const response = await vercel(body);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(message);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".rate_limits`);
    expect(rows[0].n).toBe(0);
  });

  it.each([
    ['a limit of 0', { action: 'limit', queue: 'q', maxRunning: 0 }, /invalid request/],
    ['a limit that is not a number', { action: 'limit', queue: 'q', maxRunning: '5' }, /invalid request/],
    ['a per-key limit on a kind', { action: 'limit', kind: 'k', perKey: true, maxRunning: 2 }, /set on a queue/],
  ])('Vercel: 400 for %s, no limit stored', async (_label, body, message) => {
    const response = await vercel(body);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(message);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".limits`);
    expect(rows[0].n).toBe(0);
  });

  it.each([
    ['no action', {}, /invalid request/],
    ['an unknown action', { action: 'drop', queue: 'q' }, /invalid request/],
    ['both queue and kind', { action: 'pause', queue: 'q', kind: 'k' }, /exactly one of queue or kind/],
    ['neither', { action: 'resume' }, /exactly one of queue or kind/],
    ['a bad queue name', { action: 'pause', queue: 'no spaces' }, /invalid queue name/],
    ['an unknown field', { action: 'list', queue: 'q' }, /invalid request/],
  ])('Vercel: 400 for %s, nothing changed', async (_label, body, message) => {
    const response = await vercel(body);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(message);
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".pauses`);
    expect(rows[0].n).toBe(0);
  });

  it('Vercel: 401 without the admin token, and refused while SKIPLOCK_ADMIN_TOKEN is unset', async () => {
    expect((await vercel({ action: 'list' }, {})).status).toBe(401);
    expect((await vercel({ action: 'list' }, { authorization: 'Bearer wrong-token-0123456789' })).status).toBe(401);
    const unset = await vercel({ action: 'list' }, adminAuth, { SKIPLOCK_ADMIN_TOKEN: undefined });
    expect(unset.status).toBeGreaterThanOrEqual(401);
    expect(JSON.stringify(await unset.json())).not.toContain(databaseUrl());
  });

  it('Lambda: by invoke (IAM) and over HTTP with the admin token; the change is logged with who made it', async () => {
    const lines: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    let invoked: Record<string, unknown>;
    try {
      const handler = createLambdaControl({ env: env() });
      invoked = (await handler(
        { action: 'pause', kind: 'send-email' },
        lambdaContext(10_000, 'app-prod-control'),
      )) as Record<string, unknown>;
    } finally {
      process.stdout.write = write;
    }
    expect(invoked).toMatchObject({ status: 200, action: 'pause', changed: true, paused: { scope: 'kind' } });
    expect((invoked.paused as { pausedBy: string }).pausedBy).toBe('lambda:app-prod-control');
    const parsed = lines.flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
    const logged = parsed.find((l) => l.msg === 'kind_paused');
    expect(logged).toMatchObject({ kind: 'send-email', by: 'lambda:app-prod-control' });

    const handler = createLambdaControl({ env: env() });
    const http = (headers: Record<string, string>) =>
      handler(httpApiEvent({ headers, body: JSON.stringify({ action: 'resume', kind: 'send-email' }) }));
    expect(await http({})).toMatchObject({ statusCode: 401 });
    const resumed = (await http(adminAuth)) as { statusCode: number; body: string };
    expect(resumed.statusCode).toBe(200);
    expect(JSON.parse(resumed.body)).toMatchObject({ action: 'resume', resumed: true });
  });
});
