// Control commands (the run-time controls): pause and resume queues and kinds, set and clear concurrency limits,
// through the same core functions as the API.

import { breakers, type DestinationHealth, resetBreaker } from '../core/breakers.js';
import {
  clearLimit,
  type LimitTarget,
  limits,
  type Pause,
  type PauseTarget,
  pause,
  pauses,
  resume,
  setLimit,
} from '../core/controls.js';
import { declaredLimits } from '../core/jobs.js';
import { type CommandContext, operator, str } from './command-context.js';
import { age, table, when } from './format.js';
import { EXIT, UsageError } from './io.js';

function target(scope: 'queue' | 'kind', rest: readonly string[]): PauseTarget {
  const [name, extra] = rest;
  if (!name || extra !== undefined) throw new UsageError(`needs exactly one ${scope} name`);
  return scope === 'queue' ? { queue: name } : { kind: name };
}

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

function limitTarget(scope: 'queue' | 'kind', ctx: CommandContext, name: string | undefined): LimitTarget {
  if (!name) throw new UsageError(`needs a ${scope} name`);
  if (scope === 'kind') {
    if (ctx.o['per-key']) throw new UsageError('--per-key is for queues');
    return { kind: name };
  }
  return { queue: name, perKey: ctx.o['per-key'] === true };
}

const scopeText = (scope: string, name: string) =>
  scope === 'key' ? `each concurrency key of queue ${name}` : `${scope} ${name}`;

function limitCommand(scope: 'queue' | 'kind') {
  return async (ctx: CommandContext) => {
    const [name, value, extra] = ctx.rest;
    if (value === undefined || extra !== undefined) throw new UsageError(`needs a ${scope} name and a number`);
    const n = Number(value);
    if (!Number.isInteger(n)) throw new UsageError('the limit must be a whole number');
    const { limit, previous } = await setLimit(ctx.conn, limitTarget(scope, ctx, name), n, {
      schema: ctx.schema,
      by: operator(ctx),
      reason: str(ctx.o.reason),
    });
    ctx.emit(
      `at most ${limit.maxRunning} running for ${scopeText(limit.scope, limit.name)} from the next claim on` +
        `${previous === null ? '' : ` (was ${previous})`}; running jobs are not stopped`,
      { limit, previous },
    );
    return EXIT.ok;
  };
}

function unlimitCommand(scope: 'queue' | 'kind') {
  return async (ctx: CommandContext) => {
    const [name, extra] = ctx.rest;
    if (extra !== undefined) throw new UsageError(`needs exactly one ${scope} name`);
    const ended = await clearLimit(ctx.conn, limitTarget(scope, ctx, name), { schema: ctx.schema });
    const what = scopeText(ctx.o['per-key'] ? 'key' : scope, name as string);
    ctx.emit(
      ended
        ? `cleared the run-time limit of ${what} (was ${ended.maxRunning}); the code's limit, if any, applies again`
        : `${what} had no run-time limit`,
      { cleared: ended !== null, limit: ended },
    );
    return EXIT.ok;
  };
}

export const CONTROL_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  'queues limit': limitCommand('queue'),
  'queues unlimit': unlimitCommand('queue'),
  'kinds limit': limitCommand('kind'),
  'kinds unlimit': unlimitCommand('kind'),
  async limits({ conn, schema, emit, registry }) {
    const set = await limits(conn, { schema });
    const declared = registry ? declaredLimits(registry.all()) : [];
    const rows = [
      ...set.map((l) => ({
        limit: l.scope === 'key' ? 'per key' : l.scope,
        name: l.name,
        max: String(l.maxRunning),
        running: l.scope === 'key' ? `${l.running}${l.busiestKey ? ` (${l.busiestKey})` : ''}` : String(l.running),
        source: 'run time',
        'set by': `${l.setBy} ${age((Date.now() - l.setAt.getTime()) / 1000)} ago${l.reason ? `: ${l.reason}` : ''}`,
      })),
      ...declared
        .filter((d) => !set.some((l) => l.scope === d.scope && l.name === d.name))
        .map((d) => ({
          limit: d.scope === 'key' ? 'per key' : d.scope,
          name: d.name,
          max: String(d.maxRunning),
          running: '',
          source: 'code',
          'set by': '',
        })),
    ];
    emit(
      rows.length === 0
        ? `no run-time limits${registry ? ' and none in the code' : ' (pass --jobs to list the limits the code declares)'}`
        : table(rows, ['limit', 'name', 'max', 'running', 'source', 'set by']),
      { runTime: set, declared },
    );
    return EXIT.ok;
  },
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

/** The breakers as a table, for `breakers` and `stats`. */
export function breakersTable(rows: readonly DestinationHealth[]): string {
  if (rows.length === 0) return 'no destinations recorded (kinds name them with the `destination` option)';
  return table(
    rows.map((d) => ({
      destination: d.name,
      state: d.state === 'half_open' ? 'half-open' : d.state,
      'failures/attempts': `${d.failures}/${d.calls}`,
      since: d.state === 'closed' ? '' : when(d.openedAt ?? d.changedAt),
      'next probe': d.state === 'open' ? when(d.nextProbeAt) : d.state === 'half_open' ? `job ${d.probeJobId}` : '',
      'deferred until': when(d.deferredUntil),
      trips: String(d.trips),
    })),
    ['destination', 'state', 'failures/attempts', 'since', 'next probe', 'deferred until', 'trips'],
  );
}

CONTROL_COMMANDS.breakers = async ({ conn, schema, emit }) => {
  const rows = await breakers(conn, { schema });
  emit(breakersTable(rows), rows);
  return EXIT.ok;
};

CONTROL_COMMANDS['breakers reset'] = async (ctx) => {
  const [destination, extra] = ctx.rest;
  if (!destination || extra !== undefined) throw new UsageError('needs exactly one destination');
  const { previous } = await resetBreaker(ctx.conn, destination, { schema: ctx.schema, by: operator(ctx) });
  ctx.emit(
    previous === null
      ? `no record of destination ${destination}: nothing to reset`
      : `closed the breaker of ${destination} (was ${previous === 'half_open' ? 'half-open' : previous}); its jobs are claimable from the next claim on`,
    { destination, previous },
  );
  return previous === null ? EXIT.refused : EXIT.ok;
};

export const CONTROL_SUBCOMMANDS = ['queues', 'kinds', 'breakers'];
