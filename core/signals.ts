import type { SQL } from 'drizzle-orm';
import { InvalidOptionsError, PayloadTooLargeError, SignalTokenError } from '../base/errors.js';
import { type ExecutorSource, executorOf } from '../db/executor-of.js';
import { queryUnderSignalLock, type SendSignalRow, sendSignalStatement, signalLock } from '../db/statements/signals.js';

/** The longest signal key. */
export const SIGNAL_LIMITS = { keyLength: 500 } as const;

/** What signal() did: the stored signal's id, and how many waiting jobs it woke (0: it waits for its wait). */
export interface SignalResult {
  id: string;
  woken: number;
  /** The queues of the jobs it woke: the ones `nudge: true` starts workers for. */
  queues: string[];
  /** A signal with this `id` was already stored: nothing was sent again (its id is returned). */
  deduplicated?: true;
}

export interface SignalOptions {
  /**
   * Starts workers for the queues of the jobs it woke, through the enqueuer's nudger, so a woken
   * job runs now rather than at the next tick. Send it after the transaction commits (or outside
   * one): a worker started before the commit finds nothing to run. @defaultValue false
   */
  nudge?: boolean;
  /**
   * An id of yours for this signal (1 to 255 characters): a signal sent again with the same id is
   * stored once — the second send returns the first's id, `deduplicated: true`, and wakes no one.
   * What makes a signal safe to send again after an unknown outcome (OutcomeUnknownError), for as
   * long as the first is kept (taken signals are pruned after the retention). @defaultValue none
   */
  id?: string;
}

/** A signal as statements for a neon-http `db.batch([...])` (that driver has no interactive transactions). */
export interface PreparedSignal {
  statements: SQL[];
  read(results: readonly unknown[]): SignalResult;
}

/** A key and payload checked, as the statement's parameters. Nothing is written when they are refused. */
export function signalParameters(
  key: unknown,
  payload: unknown,
  maxPayloadBytes: number,
): { key: string; payloadJson: string | null } {
  if (typeof key !== 'string' || key.length === 0 || key.length > SIGNAL_LIMITS.keyLength || key.includes('\u0000')) {
    throw new InvalidOptionsError(`a signal key must be a string of 1 to ${SIGNAL_LIMITS.keyLength} characters`);
  }
  if (payload === undefined) return { key, payloadJson: null };
  let json: string | undefined;
  try {
    json = JSON.stringify(payload);
  } catch (err) {
    throw new InvalidOptionsError(`the payload of signal "${key}" is not JSON: ${(err as Error).message}`);
  }
  if (json === undefined) return { key, payloadJson: null };
  const bytes = Buffer.byteLength(json);
  if (bytes > maxPayloadBytes) throw new PayloadTooLargeError(`signal "${key}"`, bytes, maxPayloadBytes);
  return { key, payloadJson: json };
}

/** The token id a signal is stored under: a callback token's, or `id:` and the sender's own id. */
function storedTokenId(via: { tokenId?: string; id?: unknown }): string | undefined {
  if (via.tokenId !== undefined) return via.tokenId;
  if (via.id === undefined) return undefined;
  if (typeof via.id !== 'string' || via.id.length === 0 || via.id.length > 255 || via.id.includes('\u0000')) {
    throw new InvalidOptionsError('a signal id must be a string of 1 to 255 characters');
  }
  return `id:${via.id}`;
}

/**
 * Sends a signal in `target`'s transaction when it is one (the signal exists only if it commits),
 * else in a transaction of its own: the key's lock, then the signal and the wake-up of its waiting
 * jobs. `via.tokenId`: the callback token it came through (sent once: a second use is refused);
 * `via.id`: the sender's own id (a second send is deduplicated).
 */
export async function sendSignal(
  target: ExecutorSource,
  schema: string,
  key: unknown,
  payload: unknown,
  maxPayloadBytes: number,
  via: { tokenId?: string; id?: string } = {},
): Promise<SignalResult> {
  const p = signalParameters(key, payload, maxPayloadBytes);
  const statement = sendSignalStatement(schema, p.key, p.payloadJson, storedTokenId(via));
  const rows = await queryUnderSignalLock<SendSignalRow>(executorOf(target), schema, p.key, statement);
  if (via.tokenId !== undefined && !rows[0]?.sent) {
    throw new SignalTokenError('signal_token_used', 'the signal token was already used');
  }
  return toResult(rows[0]);
}

/** The same, as statements for the caller's neon-http batch: include both, in order, then `read` the results. */
export function prepareSignal(
  schema: string,
  key: unknown,
  payload: unknown,
  maxPayloadBytes: number,
  options: { id?: string } = {},
): PreparedSignal {
  const p = signalParameters(key, payload, maxPayloadBytes);
  return {
    statements: [signalLock(schema, p.key), sendSignalStatement(schema, p.key, p.payloadJson, storedTokenId(options))],
    read(results) {
      const last = results[results.length - 1] as { rows?: SendSignalRow[] } | undefined;
      return toResult(last?.rows?.[0]);
    },
  };
}

function toResult(row: SendSignalRow | undefined): SignalResult {
  const result: SignalResult = { id: String(row?.id ?? ''), woken: Number(row?.woken ?? 0), queues: row?.queues ?? [] };
  if (row && row.sent === false) result.deduplicated = true;
  return result;
}
