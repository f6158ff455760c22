// What every command receives, and the option readers the command modules share. A module of its
// own so that commands.ts, control-commands.ts and the others import it without importing each other.

import type { JobRegistry } from '../core/jobs.js';
import type { ScheduleDefinition } from '../core/schedules.js';
import type { SkiplockDb } from '../db/connect.js';
import type { CliIo } from './io.js';

export interface CommandContext {
  conn: SkiplockDb;
  schema: string;
  registry: JobRegistry | undefined;
  /** The jobs module's `schedules`, when it exports them. */
  schedules?: readonly ScheduleDefinition[] | undefined;
  o: Record<string, string | boolean | undefined>;
  rest: string[];
  emit(human: string, data: unknown): void;
  io: CliIo;
  json: boolean;
}

/** An option's value when it was given with one (`--name value`), else undefined. */
export const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

/** Who acts, when --by is not given: the operator's login, as replay records it. */
export const operator = (ctx: CommandContext) =>
  str(ctx.o.by) ?? `cli:${ctx.io.env.USER ?? ctx.io.env.USERNAME ?? 'unknown'}`;
