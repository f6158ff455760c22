import { neonConfig } from '@neondatabase/serverless';
import type { NeonOptions } from '../connection-options.js';

/**
 * Applies `options` to the neonConfig of the Neon driver copy this module imports — the copy
 * skiplock's connections use, which an application cannot always reach (another version of the
 * package may sit beside it). Neon keeps these settings process-wide.
 */
export function applyNeonOptions(options: NeonOptions | undefined): void {
  if (!options) return;
  const settable = neonConfig as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(options)) if (value !== undefined) settable[key] = value;
}
