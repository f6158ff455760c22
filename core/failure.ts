import { CancelError, DiscardError, RetryAfterError, RetryError, SkiplockError } from '../base/errors.js';
import type { FailureRecord } from '../base/outcomes.js';
import { safeStringify } from './logger.js';
import { storableText } from './text.js';

const MAX_STACK = 4_000;
const MAX_BODY = 2_000;
const MAX_MESSAGE = 1_000;

/** The decision a failure leads to, before attempts are taken into account (the database does that). */
export type FailureDecision =
  | { outcome: 'retry'; delayMs: number | null; error: FailureRecord }
  | { outcome: 'dead'; reason: string; error: FailureRecord }
  | { outcome: 'cancelled'; error: FailureRecord };

/**
 * Reads what a handler threw. Anything — strings, undefined, objects with cycles — becomes
 * a bounded, JSON-safe record; only the skiplock error classes change the default (retry).
 * `delayMs: null` means "use the kind's backoff".
 */
export function decideFailure(thrown: unknown, attempt: number): FailureDecision {
  const error = toFailureRecord(thrown, attempt);
  if (thrown instanceof DiscardError) return { outcome: 'dead', reason: thrown.reason, error };
  if (thrown instanceof CancelError) return { outcome: 'cancelled', error };
  if (thrown instanceof RetryAfterError) return { outcome: 'retry', delayMs: thrown.delayMs, error };
  return { outcome: 'retry', delayMs: null, error };
}

export function toFailureRecord(thrown: unknown, attempt: number): FailureRecord {
  const record: FailureRecord = { class: 'Error', message: '', attempt };
  if (thrown instanceof Error) {
    record.class = truncate(thrown instanceof SkiplockError ? thrown.code : thrown.name || 'Error', 200);
    record.message = truncate(String(thrown.message), MAX_MESSAGE);
    if (thrown.stack) record.stack = truncate(thrown.stack, MAX_STACK);
    const response =
      thrown instanceof RetryError || thrown instanceof RetryAfterError || thrown instanceof DiscardError
        ? thrown.response
        : undefined;
    if (response) {
      record.responseStatus = response.status;
      if (response.body !== undefined) record.responseBody = truncate(String(response.body), MAX_BODY);
    }
  } else if (thrown === undefined || thrown === null) {
    record.class = 'NonError';
    record.message = `handler threw ${String(thrown)}`;
  } else if (typeof thrown === 'object') {
    record.class = 'NonError';
    record.message = truncate(safeStringify(thrown) ?? String(thrown), MAX_MESSAGE);
  } else {
    record.class = 'NonError';
    record.message = truncate(String(thrown), MAX_MESSAGE);
  }
  return record;
}

/** Bounded and storable: a cut in the middle of a surrogate pair is repaired, NULs replaced. */
function truncate(text: string, max: number): string {
  const cut = text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
  return storableText(cut);
}
