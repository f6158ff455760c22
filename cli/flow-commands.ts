// Flow-control commands: pause and resume queues and kinds, through the same core functions as the API.

import { type Pause, type PauseTarget, pause, pauses, resume } from '../core/flow-control.js';
import type { CommandContext } from './commands.js';
import { age, table } from './format.js';
import { EXIT, UsageError } from './io.js';

const str = (v: unknown) => (typeof v === 'string' ? v : undefined);

function target(scope: 'queue' | 'kind', rest: readonly string[]): PauseTarget {
  const [name, extra] = rest;
  if (!name || extra !== undefined) throw new UsageError(`needs exactly one ${scope} name`);
  return scope === 'queue' ? { queue: name } : { kind: name };
}

/** Who pauses, when --by is not given: the operator's login, as replay records it. */
const operator = (ctx: CommandContext) => str(ctx.o.by) ?? `cli:${ctx.io.env.USER ?? ctx.io.env.USERNAME ?? 'unknown'}`;

const sinceText = (p: Pause) => `${p.pausedAt.toISOString()} (${age((Date.now() - p.pausedAt.getTime()) / 1000)} ago)`;

/** The pauses as a table, for `pauses` and `stats`. */
export function pausesTable(rows: readonly Pause[]): string {
  if (rows.length === 0) return 'nothing paused';
  return table(
    rows.map((p) => ({ paused: p.scope, name: p.name, since: sinceText(p), by: p.pausedBy, reason: p.reason ?? '' })),
    ['paused', 'name', 'since', 'by', 'reason'],
  );
}

function pauseCommand(scope: 'queue' | 'kind') {
  return async (ctx: CommandContext) => {
    const { pause: p, changed } = await pause(ctx.conn, target(scope, ctx.rest), {
      schema: ctx.schema,
      by: operator(ctx),
      reason: str(ctx.o.reason),
    });
    ctx.emit(
      changed
        ? `paused ${scope} ${p.name}: no invocation claims its jobs from the next claim on; running jobs finish`
        : `${scope} ${p.name} was already paused, since ${sinceText(p)} by ${p.pausedBy}`,
      { paused: p, changed },
    );
    return EXIT.ok;
  };
}

function resumeCommand(scope: 'queue' | 'kind') {
  return async (ctx: CommandContext) => {
    const ended = await resume(ctx.conn, target(scope, ctx.rest), { schema: ctx.schema });
    const name = ctx.rest[0] as string;
    ctx.emit(
      ended ? `resumed ${scope} ${name} (paused since ${sinceText(ended)})` : `${scope} ${name} was not paused`,
      { resumed: ended !== null, pause: ended },
    );
    return EXIT.ok;
  };
}

export const FLOW_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  'queues pause': pauseCommand('queue'),
  'queues resume': resumeCommand('queue'),
  'kinds pause': pauseCommand('kind'),
  'kinds resume': resumeCommand('kind'),
  async pauses({ conn, schema, emit }) {
    const rows = await pauses(conn, { schema });
    emit(pausesTable(rows), rows);
    return EXIT.ok;
  },
};

export const FLOW_SUBCOMMANDS = ['queues', 'kinds'];
