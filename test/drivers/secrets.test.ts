import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createLambdaEnqueue, createLambdaWorker } from '../../adapters/lambda.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { databaseUrlFromSecret, secretDatabaseUrl } from '../../adapters/secrets.js';
import { ConfigError } from '../../base/errors.js';
import { defineJob } from '../../core/jobs.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { freePort, startEmbeddedPostgres } from '../../scripts/local-postgres.js';
import { lambdaContext, scheduledEvent } from '../../testing/events.js';
import { configureNeonForLocalPostgres, testDriver } from '../helpers/db.js';
import { awsEnvFor, startSecretsEndpoint } from '../helpers/secrets-endpoint.js';

// On every driver (test/drivers): a refused login is recognised by the SQLSTATE each driver
// reports in its own way (node-postgres, Neon's WebSocket pool, SQL over HTTP), and only then is
// the secret fetched again.

// A Postgres that checks passwords (the machine's server trusts everyone), so a rotated
// password really is refused.
let pg: Awaited<ReturnType<typeof startEmbeddedPostgres>>;
let secrets: Awaited<ReturnType<typeof startSecretsEndpoint>>;
let port: number;
const SCHEMA = 'secrets_test';
const PASSWORD = 'postgres';
const tick = defineJob({ kind: 'tick', payload: z.object({}), timeoutMs: 1_000, handler: () => {} });
const logLines: string[] = [];
const originalWrite = process.stdout.write.bind(process.stdout);

beforeAll(async () => {
  configureNeonForLocalPostgres();
  port = await freePort();
  pg = await startEmbeddedPostgres(port);
  secrets = await startSecretsEndpoint();
  Object.assign(process.env, awsEnvFor(secrets.url));
  const db = connect({ connectionString: pg.url, driver: testDriver() });
  await migrate(db, { schema: SCHEMA });
  await db.close();
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    logLines.push(String(chunk));
    return originalWrite(chunk, ...rest);
  }) as typeof process.stdout.write;
}, 120_000);
afterAll(async () => {
  process.stdout.write = originalWrite;
  await resetSharedRuntime();
  await secrets.close();
  await pg.stop();
});
afterEach(() => resetSharedRuntime());

const urlWith = (password: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
const env = (secretId: string) => ({
  DATABASE_SECRET_ID: secretId,
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: SCHEMA,
  SKIPLOCK_LOG_LEVEL: 'info',
  ...awsEnvFor(secrets.url),
});
const callsFor = (id: string) => secrets.calls.filter((c) => c === id).length;

describe(`Secrets Manager through the real AWS SDK client (${testDriver()})`, () => {
  it('reads a plain URL secret and caches it across warm invocations', async () => {
    secrets.secrets.set('plain', urlWith(PASSWORD));
    const enqueue = createLambdaEnqueue([tick], { env: env('plain') });
    for (let i = 0; i < 3; i++) expect(await enqueue({ kind: 'tick', payload: {} })).toMatchObject({ status: 200 });
    expect(callsFor('plain')).toBe(1);
  });

  it('reads an RDS-style JSON secret', async () => {
    secrets.secrets.set(
      'json',
      JSON.stringify({
        host: '127.0.0.1',
        port,
        username: 'postgres',
        password: PASSWORD,
        dbname: 'postgres',
        engine: 'postgres',
      }),
    );
    const summary = await createLambdaWorker([tick], { env: env('json') })(scheduledEvent(), lambdaContext(10_000));
    expect(summary).toMatchObject({ stoppedBecause: 'drained' });
  });

  it('a refused login (rotated password) triggers exactly one refresh, then works', async () => {
    secrets.secrets.set('rotating', [urlWith('old-password-x1'), urlWith(PASSWORD)]);
    const summary = await createLambdaWorker([tick], { env: env('rotating') })(scheduledEvent(), lambdaContext(10_000));
    expect(summary).toMatchObject({ stoppedBecause: 'drained' });
    expect(callsFor('rotating')).toBe(2);
  });

  it('a secret that stays wrong is refreshed once, then reported, without the password', async () => {
    secrets.secrets.set('wrong', urlWith('still-wrong-pw-77'));
    const enqueue = createLambdaEnqueue([tick], { env: env('wrong') });
    const result = await enqueue({ kind: 'tick', payload: {} });
    expect(result).toMatchObject({ status: 503 });
    expect(callsFor('wrong')).toBe(2);
    expect(JSON.stringify(result)).not.toContain('still-wrong-pw-77');
  });

  it('a missing secret is a clear error naming the secret', async () => {
    const result = await createLambdaEnqueue([tick], { env: env('does-not-exist') })({ kind: 'tick', payload: {} });
    expect(result).toMatchObject({
      status: 500,
      error: { code: 'config_error', message: 'secret does-not-exist was not found' },
    });
  });

  it('no log line carries a password', () => {
    const all = logLines.join('');
    for (const secret of [
      PASSWORD === 'postgres' ? 'postgres:postgres@' : PASSWORD,
      'old-password-x1',
      'still-wrong-pw-77',
    ]) {
      expect(all).not.toContain(secret);
    }
  });
});

describe('secret formats', () => {
  it('accepts a URL, JSON with url, and RDS-style JSON; names what is missing without values', () => {
    expect(databaseUrlFromSecret('s', 'postgres://u:p@h/d')).toBe('postgres://u:p@h/d');
    expect(databaseUrlFromSecret('s', '{"url":"postgresql://u:p@h/d"}')).toBe('postgresql://u:p@h/d');
    expect(
      databaseUrlFromSecret(
        's',
        JSON.stringify({ host: 'h', username: 'u@x', password: 'p/w', dbname: 'd', port: 5433 }),
      ),
    ).toBe('postgres://u%40x:p%2Fw@h:5433/d');
    expect(() => databaseUrlFromSecret('s', 'hunter2')).toThrow(ConfigError);
    expect(() => databaseUrlFromSecret('s', 'hunter2')).toThrow('secret s is neither a postgres:// URL nor JSON');
    expect(() => databaseUrlFromSecret('s', '{"password":"hunter2"')).toThrow(
      'secret s looks like JSON but does not parse',
    );
    const missing = (() => {
      try {
        databaseUrlFromSecret('s', JSON.stringify({ password: 'hunter2', host: 'h' }));
      } catch (err) {
        return (err as Error).message;
      }
    })();
    expect(missing).toBe('secret s has no url and lacks username, dbname');
    expect(missing).not.toContain('hunter2');
  });

  it('keeps using an expired cached URL when Secrets Manager cannot be reached, and says so only when it has none', async () => {
    let calls = 0;
    const source = secretDatabaseUrl('s', {
      ttlMs: 0,
      fetchSecret: async () => {
        calls++;
        if (calls > 1) throw new ConfigError('could not read secret s (ThrottlingException)');
        return 'postgres://u:p@h/d';
      },
    });
    expect(await source.get()).toBe('postgres://u:p@h/d');
    expect(await source.get()).toBe('postgres://u:p@h/d'); // refetch failed: the stale value serves
    expect(calls).toBe(2);
    const empty = secretDatabaseUrl('s', {
      ttlMs: 0,
      fetchSecret: async () => Promise.reject(new ConfigError('secret s was not found')),
    });
    await expect(empty.get()).rejects.toThrow('secret s was not found');
  });
});
