import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ConfigError, InvalidOptionsError, SignalTokenError } from '../base/errors.js';
import { SIGNAL_LIMITS } from './signals.js';

/**
 * Callback tokens for signals from outside (a partner's webhook, an approval link): the token names
 * a signal key and an expiry, signed with a secret (HMAC-SHA256), so the signal route can take a POST
 * from anyone holding it without a bearer token of ours. Each token sends one signal: its id is
 * stored with the signal and a second use is refused. Create the token inside a step, so a retry
 * reuses the same one.
 */

/** The shortest secret that signs tokens. */
export const SIGNAL_SECRET_MIN_LENGTH = 32;
/** @defaultValue a token lives 7 days; at most 90 */
export const SIGNAL_TOKEN_DEFAULTS = { expiresInMs: 7 * 86_400_000, maxExpiresInMs: 90 * 86_400_000 } as const;

export interface SignalTokenOptions {
  /** How long the token can be used. @defaultValue 7 days (at most 90) */
  expiresInMs?: number;
  /** The clock (tests). @defaultValue now */
  now?: Date;
}

/** What a valid token carries. */
export interface SignalTokenClaims {
  key: string;
  /** Unique per token: the signal it sends is stored with it, so it sends once. */
  tokenId: string;
  expiresAt: Date;
}

/** A token for one signal on `key`, signed with `secret` (SKIPLOCK_SIGNAL_SECRET on the deployed routes). */
export function createSignalToken(secret: string | undefined, key: string, options: SignalTokenOptions = {}): string {
  checkSecret(secret);
  if (typeof key !== 'string' || key.length === 0 || key.length > SIGNAL_LIMITS.keyLength) {
    throw new InvalidOptionsError(`a signal key must be a string of 1 to ${SIGNAL_LIMITS.keyLength} characters`);
  }
  const ttl = options.expiresInMs ?? SIGNAL_TOKEN_DEFAULTS.expiresInMs;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > SIGNAL_TOKEN_DEFAULTS.maxExpiresInMs) {
    throw new InvalidOptionsError('expiresInMs must be an integer from 1 to 90 days in milliseconds');
  }
  const expiresAt = (options.now ?? new Date()).getTime() + ttl;
  const body = Buffer.from(JSON.stringify({ k: key, e: expiresAt, i: randomBytes(12).toString('base64url') })).toString(
    'base64url',
  );
  return `${body}.${sign(secret as string, body)}`;
}

/** Checks a token's signature and expiry; its claims, or a SignalTokenError (nothing is said of why a signature failed). */
export function readSignalToken(secret: string | undefined, token: unknown, now: Date = new Date()): SignalTokenClaims {
  checkSecret(secret);
  const invalid = () => new SignalTokenError('invalid_signal_token', 'the signal token is not valid');
  if (typeof token !== 'string' || token.length > 4_096) throw invalid();
  const [body, signature, extra] = token.split('.');
  if (!body || !signature || extra !== undefined) throw invalid();
  const expected = Buffer.from(sign(secret as string, body));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
  let claims: { k?: unknown; e?: unknown; i?: unknown };
  try {
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (typeof claims.k !== 'string' || typeof claims.e !== 'number' || typeof claims.i !== 'string') throw invalid();
  if (claims.e <= now.getTime()) throw new SignalTokenError('signal_token_expired', 'the signal token has expired');
  return { key: claims.k, tokenId: claims.i, expiresAt: new Date(claims.e) };
}

function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(`skiplock.signal.v1.${body}`).digest('base64url');
}

function checkSecret(secret: string | undefined): void {
  if (typeof secret !== 'string' || secret.length < SIGNAL_SECRET_MIN_LENGTH) {
    throw new ConfigError(
      `signal tokens need a secret of at least ${SIGNAL_SECRET_MIN_LENGTH} characters (SKIPLOCK_SIGNAL_SECRET)`,
    );
  }
}
