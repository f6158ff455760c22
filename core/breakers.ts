import { InvalidOptionsError } from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from '../db/connect.js';
import {
  type BreakerState,
  type DestinationHealth,
  listDestinations,
  resetDestination,
} from '../db/statements/destinations.js';
import type { ControlOptions } from './controls.js';
import { MAX_DESTINATION_LENGTH } from './destinations.js';

/**
 * The destinations skiplock remembers, with their breakers: state, failures and attempts in the
 * rolling window, since when it is open, when the next probe may go, a Retry-After deferral. Open
 * and half-open ones first.
 */
export async function breakers(conn: SkiplockConnection, options: ControlOptions = {}): Promise<DestinationHealth[]> {
  return listDestinations(conn.executor, assertSchemaName(options.schema ?? DEFAULT_SCHEMA));
}

/**
 * Closes a destination's breaker and ends any Retry-After deferral, at once: its jobs are claimable
 * from the next claim, and its rolling window starts empty. For when you know the partner is back
 * before the next probe would find out. Returns the state it was in (null: skiplock has no record
 * of the destination).
 */
export async function resetBreaker(
  conn: SkiplockConnection,
  destination: string,
  options: ControlOptions & { by: string },
): Promise<{ previous: BreakerState | null }> {
  if (typeof destination !== 'string' || destination.length === 0 || destination.length > MAX_DESTINATION_LENGTH) {
    throw new InvalidOptionsError(`a destination is a string of 1-${MAX_DESTINATION_LENGTH} characters`);
  }
  const by = typeof options.by === 'string' ? options.by.trim() : '';
  if (by.length === 0 || by.length > 255) {
    throw new InvalidOptionsError('by must name who resets the breaker (1-255 characters)');
  }
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  return { previous: await resetDestination(conn.executor, schema, { name: destination, by }) };
}

export type { BreakerState, DestinationHealth };
