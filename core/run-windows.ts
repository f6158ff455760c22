import type { DeclaredWindow } from '../base/controls.js';
import { ConfigError } from '../base/errors.js';
import { isTimeZone } from '../base/identifiers.js';

/**
 * When a kind's or a queue's jobs may start: from `start` to `end` (24-hour `HH:MM`) in
 * `timezone`, every day. `end` before `start` wraps past midnight (`23:00`–`06:00`). Outside it a
 * job is not claimed (nor rescued) and burns no attempt; its deadline still applies.
 */
export interface RunWindow {
  start: string;
  end: string;
  /** @defaultValue 'UTC' */
  timezone?: string;
}

/** A window as minutes of the day, checked. */
export interface WindowSpec {
  startMinute: number;
  endMinute: number;
  timezone: string;
}

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;

export function runWindowOption(owner: string, value: unknown): WindowSpec | undefined {
  if (value === undefined) return undefined;
  const w = value as Partial<RunWindow> | null;
  if (w === null || typeof w !== 'object')
    throw new ConfigError(`${owner}: runWindow must be { start, end, timezone? }`);
  const minute = (v: unknown, name: string) => {
    const m = typeof v === 'string' ? HHMM.exec(v) : null;
    if (!m) throw new ConfigError(`${owner}: runWindow.${name} must be a time like "23:00" (HH:MM, 24-hour)`);
    return Number(m[1]) * 60 + Number(m[2]);
  };
  const startMinute = minute(w.start, 'start');
  const endMinute = minute(w.end, 'end');
  if (startMinute === endMinute) throw new ConfigError(`${owner}: runWindow.start and end must differ`);
  const timezone = w.timezone ?? 'UTC';
  if (!isTimeZone(timezone)) {
    throw new ConfigError(`${owner}: runWindow.timezone ${JSON.stringify(timezone)} is not an IANA time zone`);
  }
  return { startMinute, endMinute, timezone };
}

export type { DeclaredWindow };
