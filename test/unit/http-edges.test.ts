// The HTTP and configuration edges of the Lambda and Vercel adapters that are decided before any
// database access: they run once, not once per driver. The database URL points at a closed port,
// so a 401 (not a 503) proves nothing touched a database.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createLambdaEnqueue,
  createLambdaMaintenance,
  createLambdaReplay,
  createLambdaWorker,
} from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { httpApiEvent, lambdaContext, scheduledEvent } from '../../testing/events.js';
import { sendEmail } from '../helpers/kinds.js';
import { captureStdout } from '../helpers/stdout.js';
import { ROUTES, routeRequest, SECRETS, tick } from '../helpers/vercel-routes.js';

afterEach(() => resetSharedRuntime());

const UNREACHABLE = 'postgres://u:p@127.0.0.1:1/none';
const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: UNREACHABLE,
  SKIPLOCK_LOG_LEVEL: 'error',
  ...SECRETS,
  ...extra,
});
const email = { to: 'ada@example.com', subject: 'Welcome', body: 'hi' };
type Body = { error: { code: string; message: string } };

describe('Lambda enqueue over HTTP: refused before any database access', () => {
  it.each([
    ['no header', {}],
    ['wrong scheme', { authorization: `Basic ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` }],
    ['wrong token', { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN.replace('0', '1')}` }],
    ['token of another length', { authorization: 'Bearer short' }],
    ['empty bearer', { authorization: 'Bearer ' }],
  ])('401 for %s', async (_name, headers) => {
    const handler = createLambdaEnqueue([sendEmail], { env: env() });
    const response = (await handler(
      httpApiEvent({ headers, body: JSON.stringify({ kind: 'send-email', payload: email }) }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(401);
    expect((JSON.parse(response.body) as Body).error.code).toBe('unauthorized');
  });

  it('401 when SKIPLOCK_ENQUEUE_TOKEN is unset, even with a bearer header', async () => {
    const open = createLambdaEnqueue([sendEmail], { env: env({ SKIPLOCK_ENQUEUE_TOKEN: undefined }) });
    const response = (await open(
      httpApiEvent({ headers: { authorization: 'Bearer anything-at-all-here' }, body: '{}' }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(401);
    expect((JSON.parse(response.body) as Body).error.message).toMatch(/disabled until SKIPLOCK_ENQUEUE_TOKEN is set/);
  });

  it('a token under 16 characters disables the endpoint: the right token and a wrong one both get 401', async () => {
    const weak = 'x';
    const { result, lines } = await captureStdout(async () => {
      const handler = createLambdaEnqueue([sendEmail], { env: env({ SKIPLOCK_ENQUEUE_TOKEN: weak }) });
      const body = JSON.stringify({ kind: 'send-email', payload: email });
      const right = (await handler(httpApiEvent({ headers: { authorization: `Bearer ${weak}` }, body }))) as {
        statusCode: number;
        body: string;
      };
      const wrong = (await handler(httpApiEvent({ headers: { authorization: 'Bearer y' }, body }))) as {
        statusCode: number;
        body: string;
      };
      return { right, wrong };
    });
    for (const response of [result.right, result.wrong]) {
      expect(response.statusCode).toBe(401);
      expect((JSON.parse(response.body) as Body).error.message).toBe(
        'this endpoint is disabled: SKIPLOCK_ENQUEUE_TOKEN must be at least 16 characters',
      );
    }
    // Said once in the logs, by name, never by value.
    expect(lines.filter((l) => l.includes('SKIPLOCK_ENQUEUE_TOKEN must be at least 16')).length).toBeLessThanOrEqual(1);
    expect(lines.join('')).not.toContain(`"${weak}"`);
  });

  it.each([
    'not a url at all s3cret-pw',
    'mysql://app:s3cret-pw@127.0.0.1:3306/db',
    'postgres://app:s3cret-pw@127.0.0.1:notaport/db',
    'postgres://app:s3cret-pw@:5432/db',
    'postgres://app:s3cret-pw@127.0.0.1:99999/db',
    'postgres://app:s3cret-pw@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem',
  ])(
    'a malformed or unusable DATABASE_URL (%#) is reported without the password, in the answer or the logs',
    async (url) => {
      const { lines } = await captureStdout(async () => {
        const bad = createLambdaEnqueue([sendEmail], { env: env({ DATABASE_URL: url, SKIPLOCK_LOG_LEVEL: 'debug' }) });
        const response = await bad({ kind: 'send-email', payload: email });
        expect((response as { status: number }).status).toBeGreaterThanOrEqual(500);
        expect(JSON.stringify(response)).not.toContain('s3cret-pw');
        const worker = await createLambdaWorker([sendEmail], {
          env: env({ DATABASE_URL: url, SKIPLOCK_LOG_LEVEL: 'debug' }),
        })(scheduledEvent(), lambdaContext(5_000));
        expect(JSON.stringify(worker)).not.toContain('s3cret-pw');
      });
      expect(lines.join('')).not.toContain('s3cret-pw');
    },
  );

  it('a dead database is a 503 without the URL or password in the answer', async () => {
    const down = createLambdaEnqueue([sendEmail], {
      env: env({ DATABASE_URL: 'postgres://app:hunter2-secret@127.0.0.1:1/db' }),
    });
    const response = (await down(
      httpApiEvent({
        headers: { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` },
        body: JSON.stringify({ kind: 'send-email', payload: email }),
      }),
    )) as { statusCode: number; body: string };
    expect(response.statusCode).toBe(503);
    expect(response.body).not.toContain('hunter2');
    expect(response.body).not.toContain('127.0.0.1');
  });
});

describe('configuration errors: each function checks only what it reads', () => {
  it('a worker whose shared settings are wrong lists every problem, with no stack', async () => {
    const worker = createLambdaWorker([sendEmail], {
      env: { SKIPLOCK_CONCURRENCY: 'lots', SKIPLOCK_DRIVER: 'mysql', SKIPLOCK_COMPLETED_JOBS: 'archive' },
    });
    const result = (await worker(scheduledEvent(), lambdaContext(10_000))) as { ok: boolean; error: string };
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/SKIPLOCK_DRIVER/);
    expect(result.error).toMatch(/DATABASE_URL must be set/);
    expect(result.error).not.toMatch(/at .*\.ts:\d+/);
  });

  it('a bad worker setting fails the worker with its name, not the enqueue, replay or maintenance functions', async () => {
    const bad = env({ SKIPLOCK_CONCURRENCY: 'lots', SKIPLOCK_COMPLETED_JOBS: 'archive' });
    const worker = (await createLambdaWorker([tick], { env: bad })(scheduledEvent(), lambdaContext(5_000))) as {
      ok: boolean;
      error: string;
    };
    expect(worker.ok).toBe(false);
    expect(worker.error).toBe(
      'invalid configuration: SKIPLOCK_CONCURRENCY must be a whole number from 1 to 1000; SKIPLOCK_COMPLETED_JOBS Invalid option: expected one of "keep"|"delete"',
    );
    // The others get as far as the (unreachable) database: their settings are fine.
    const enqueue = await createLambdaEnqueue([tick], { env: bad })({ kind: 'tick', payload: {} });
    expect(enqueue).toMatchObject({ status: 503, error: { code: 'database_unreachable' } });
    const replay = await createLambdaReplay([tick], { env: bad })({ all: true, dryRun: true });
    expect(replay).toMatchObject({ status: 503 });
    const maintenance = (await createLambdaMaintenance({ env: bad })(scheduledEvent(), lambdaContext(5_000))) as {
      ok: boolean;
      error: string;
    };
    expect(maintenance.ok).toBe(false);
    expect(maintenance.error).not.toMatch(/invalid configuration/);
  });

  it('a bad enqueue limit fails the enqueue function with its name, not the worker', async () => {
    const bad = env({ SKIPLOCK_MAX_PAYLOAD_BYTES: '-5' });
    const enqueue = await createLambdaEnqueue([tick], { env: bad })({ kind: 'tick', payload: {} });
    expect(enqueue).toMatchObject({
      status: 500,
      error: { code: 'config_error', message: 'invalid configuration: SKIPLOCK_MAX_PAYLOAD_BYTES must be at least 1' },
    });
    const worker = await createLambdaWorker([tick], { env: bad })(scheduledEvent(), lambdaContext(5_000));
    expect(worker).toMatchObject({ stoppedBecause: 'error', errorCode: expect.any(String) });
    expect(JSON.stringify(worker)).not.toMatch(/SKIPLOCK_MAX_PAYLOAD_BYTES/);
  });
});

describe.each(ROUTES)('Vercel $name route auth', (route) => {
  it.each([
    ['no header', undefined],
    ['wrong scheme', `Basic ${SECRETS[route.secret]}`],
    ['wrong token', `Bearer ${SECRETS[route.secret].replace('0', '9')}`],
    ['token of another length', 'Bearer x'],
  ])('401 for %s, before any database access', async (_name, authorization) => {
    const response = await route.make(env())(routeRequest(route, authorization));
    expect(response.status).toBe(401);
    expect(((await response.json()) as Body).error.code).toBe('unauthorized');
  });

  it('401 naming the variable when its secret is unset or too short, whatever the caller sends', async () => {
    for (const value of [undefined, 'short-secret']) {
      const response = await route.make(env({ [route.secret]: value }))(
        routeRequest(route, `Bearer ${value ?? 'whatever-the-caller-sends'}`),
      );
      expect(response.status).toBe(401);
      expect(((await response.json()) as Body).error.message).toContain(route.secret);
    }
  });
});

describe('bodies that cannot be stored as sent are refused, not altered', () => {
  const auth = { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}` };
  // "bo" then a lone continuation byte: not UTF-8.
  const invalidUtf8 = Buffer.concat([
    Buffer.from('{"kind":"send-email","payload":{"to":"ada@example.com","subject":"'),
    Buffer.from([0x62, 0x6f, 0x80]),
    Buffer.from('"}}'),
  ]);
  const protoKey = '{"kind":"send-email","payload":{"to":"ada@example.com","subject":"s","__proto__":{"x":1}}}';

  it('400 for a body that is not UTF-8, and for a __proto__ key, on Lambda and Vercel, before the database', async () => {
    const lambda = createLambdaEnqueue([sendEmail], { env: env() });
    const viaLambda = async (body: Buffer | string) => {
      const event = httpApiEvent({ headers: auth, body: Buffer.from(body).toString('base64'), base64: false });
      event.isBase64Encoded = true;
      const response = (await lambda(event)) as { statusCode: number; body: string };
      return { status: response.statusCode, code: (JSON.parse(response.body) as Body).error.code };
    };
    const vercel = ROUTES[0]!.make(env());
    const viaVercel = async (body: Buffer | string) => {
      const response = await vercel(
        new Request('https://app.example.com/api/enqueue', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: new Uint8Array(Buffer.from(body)),
        }),
      );
      return { status: response.status, code: ((await response.json()) as Body).error.code };
    };
    for (const send of [viaLambda, viaVercel]) {
      expect(await send(invalidUtf8)).toEqual({ status: 400, code: 'invalid_utf8' });
      expect(await send(protoKey)).toEqual({ status: 400, code: 'invalid_key' });
    }
  });
});
