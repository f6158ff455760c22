import { describe, expect, it } from 'vitest';
import {
  closeConsoleSession,
  countConsoleLoginAttempt,
  forgetConsoleLoginAttemptsOf,
  openConsoleSession,
  readConsoleSession,
  tokenId,
} from '../../adapters/console/sessions.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { useSuppliedClock } from '../helpers/supplied-clock.js';

// The console's statements on every driver: its sessions and its login throttle (array
// parameters, timestamps read back as epoch milliseconds). test/functions/console.test.ts drives
// the console itself, on pg.
let t: TestContext;
useTestSchema('console_statements', (ctx) => {
  t = ctx;
});

const { at } = useSuppliedClock();
const opts = (ms: number) => ({ schema: t.schema, now: at(ms) });
const admin = tokenId('admin-token-0123456789abcdef00');
const rowsOf = async (table: string, column: string) =>
  (await t.admin.query(`select ${column} as v from "${t.schema}".${table}`)).rows.map((r) => r.v).sort();

describe(`the console's sessions (${testDriver()})`, () => {
  it('a session opened by a token is read back until it expires, only for that token, and not after it is closed', async () => {
    const request = { who: 'ops@example.com', readOnly: true, tokenId: admin, client: 'ip:203.0.113.7', ttlMs: 60_000 };
    const { secret, session } = await openConsoleSession(t.db, request, opts(0));
    expect(session.expiresAt).toEqual(at(60_000));
    expect(await readConsoleSession(t.db, secret, ['other-token', admin], opts(30_000))).toEqual({
      who: 'ops@example.com',
      readOnly: true,
      csrf: session.csrf,
      expiresAt: at(60_000),
    });
    // Not for a session opened by another token, not at its expiry, not for an unknown secret.
    expect(await readConsoleSession(t.db, secret, ['other-token'], opts(30_000))).toBeNull();
    expect(await readConsoleSession(t.db, secret, [admin], opts(60_000))).toBeNull();
    expect(await readConsoleSession(t.db, 'x'.repeat(43), [admin], opts(30_000))).toBeNull();

    // Opening a session drops the expired ones; closing one ends it at once.
    const second = await openConsoleSession(t.db, { ...request, readOnly: false }, opts(120_000));
    expect(await rowsOf('console_sessions', 'read_only')).toEqual([false]);
    expect((await readConsoleSession(t.db, second.secret, [admin], opts(121_000)))?.readOnly).toBe(false);
    await closeConsoleSession(t.db, second.secret, { schema: t.schema });
    expect(await readConsoleSession(t.db, second.secret, [admin], opts(121_000))).toBeNull();
    expect(await rowsOf('console_sessions', 'who')).toEqual([]);
  });
});

describe(`the console's login throttle (${testDriver()})`, () => {
  it('blocks a client past its attempts until its window ends, counts every client together, forgets on a right token', async () => {
    const throttle = { perClient: 2, overall: 100, windowMs: 60_000 };
    const attempt = (client: string, ms: number) => countConsoleLoginAttempt(t.db, client, throttle, opts(ms));
    expect(await attempt('ip:a', 0)).toEqual({ blockedUntil: null, overallFailures: 1 });
    expect(await attempt('ip:a', 1_000)).toEqual({ blockedUntil: null, overallFailures: 2 });
    // The third attempt in the window is over the limit: blocked until the window after it ends.
    expect(await attempt('ip:a', 2_000)).toEqual({ blockedUntil: at(62_000), overallFailures: 3 });
    // While blocked, an attempt changes nothing for the client; every client's count still grows.
    expect(await attempt('ip:a', 3_000)).toEqual({ blockedUntil: at(62_000), overallFailures: 4 });
    expect(await attempt('ip:b', 3_000)).toEqual({ blockedUntil: null, overallFailures: 5 });
    // A right token from a: its attempts are forgotten, and its attempt taken back from the total.
    await forgetConsoleLoginAttemptsOf(t.db, 'ip:a', { schema: t.schema });
    expect(await attempt('ip:a', 4_000)).toEqual({ blockedUntil: null, overallFailures: 5 });
    // A window later, every count starts over, and the clients whose windows ended are deleted.
    expect(await attempt('ip:c', 70_000)).toEqual({ blockedUntil: null, overallFailures: 1 });
    expect(await rowsOf('console_logins', 'client')).toEqual(['*', 'ip:c']);
  });
});
