import { DestinationError, DiscardError, InvalidOptionsError, RetryAfterError, RetryError } from '../base/errors.js';

/**
 * A destination's circuit breaker, as a kind (option `breaker`) or a worker (option `breakers`, per
 * destination) sets it. The breaker opens when, over the last `windowMs`, at least `failures`
 * attempts failed against the destination and they were at least `failureRate` of its attempts;
 * after `coolDownMs` one probe job goes through (half-open): success closes it, failure reopens it
 * for twice as long, up to `maxCoolDownMs`.
 */
export interface BreakerSettings {
  /** @defaultValue 5 */
  failures: number;
  /** @defaultValue 0.5 */
  failureRate: number;
  /** @defaultValue 60000 */
  windowMs: number;
  /** @defaultValue 30000 */
  coolDownMs: number;
  /** @defaultValue 600000 */
  maxCoolDownMs: number;
  /**
   * A RetryAfterError (a 429 or 503 with Retry-After) defers the whole destination, not only the one
   * job: no job for it is claimed until then (at most 24 hours). @defaultValue true
   */
  retryAfterDefersDestination: boolean;
}

export const BREAKER_DEFAULTS: Readonly<BreakerSettings> = Object.freeze({
  failures: 5,
  failureRate: 0.5,
  windowMs: 60_000,
  coolDownMs: 30_000,
  maxCoolDownMs: 600_000,
  retryAfterDefersDestination: true,
});

/** The longest a destination name may be. */
export const MAX_DESTINATION_LENGTH = 200;

/** Validates breaker settings (kind option, worker option) and fills in the defaults. */
export function breakerSettings(given: Partial<BreakerSettings> | undefined, where: string): BreakerSettings {
  const s = { ...BREAKER_DEFAULTS, ...(given ?? {}) };
  const whole = (v: number, min: number) => Number.isInteger(v) && v >= min && v <= 2_147_483_647;
  if (!whole(s.failures, 1)) throw new InvalidOptionsError(`${where}: breaker.failures must be a whole number ≥ 1`);
  if (!(typeof s.failureRate === 'number' && s.failureRate > 0 && s.failureRate <= 1)) {
    throw new InvalidOptionsError(`${where}: breaker.failureRate must be in (0, 1]`);
  }
  if (!whole(s.windowMs, 1_000)) throw new InvalidOptionsError(`${where}: breaker.windowMs must be ≥ 1000`);
  if (!whole(s.coolDownMs, 1)) throw new InvalidOptionsError(`${where}: breaker.coolDownMs must be ≥ 1`);
  if (!whole(s.maxCoolDownMs, s.coolDownMs)) {
    throw new InvalidOptionsError(`${where}: breaker.maxCoolDownMs must be a whole number ≥ coolDownMs`);
  }
  if (typeof s.retryAfterDefersDestination !== 'boolean') {
    throw new InvalidOptionsError(`${where}: breaker.retryAfterDefersDestination must be true or false`);
  }
  return s;
}

/** Error codes of a connection that failed or broke: Node's sockets and DNS, undici (fetch). */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
]);

/**
 * Whether what a handler threw counts against its destination's breaker: an explicit
 * DestinationError; a 5xx answer (the response of a RetryError, RetryAfterError or DiscardError);
 * the attempt's own timeout, or a fetch aborted by a timeout signal; a connection that failed
 * (refused, reset, DNS, undici's socket and timeout errors, also as the `cause` of fetch's
 * TypeError). A 4xx — a discard, a 429 — does not: the destination answered. Nor does any other
 * error: a bug in the handler is not the partner's fault.
 */
export function countsAgainstDestination(thrown: unknown, timedOut: boolean): boolean {
  if (timedOut) return true;
  if (thrown instanceof DestinationError) return true;
  if (thrown instanceof RetryError || thrown instanceof RetryAfterError || thrown instanceof DiscardError) {
    const status = thrown.response?.status;
    if (status !== undefined) return status >= 500 && status <= 599;
  }
  return isConnectionFailure(thrown, 0);
}

function isConnectionFailure(thrown: unknown, depth: number): boolean {
  if (depth > 4 || thrown === null || typeof thrown !== 'object') return false;
  const e = thrown as { code?: unknown; name?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && CONNECTION_CODES.has(e.code)) return true;
  // AbortSignal.timeout() aborts fetch with a DOMException named TimeoutError.
  if (e.name === 'TimeoutError') return true;
  return isConnectionFailure(e.cause, depth + 1);
}
