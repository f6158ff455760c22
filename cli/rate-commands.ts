// Rate-limit commands: list, set and clear rates, through the same core functions as the API.

import { declaredRateLimits } from '../core/jobs.js';
import {
  clearRateLimit,
  parseRate,
  type RateLimitScope,
  type RateLimitTarget,
  type RateUse,
  rateLimits,
  rateText,
  setRateLimit,
} from '../core/rate-limits.js';
import { type CommandContext, operator, str } from './command-context.js';
import { age, table } from './format.js';
import { EXIT, UsageError } from './io.js';

/** `queue q [--per-key]`, `kind k`, `destination d` → a target. */
function targetOf(ctx: CommandContext, scope: string | undefined, name: string | undefined): RateLimitTarget {
  if (!name) throw new UsageError('needs queue <name>, kind <name> or destination <name>');
  const perKey = ctx.o['per-key'] === true;
  if (perKey && scope !== 'queue') throw new UsageError('--per-key is for queues');
  if (scope === 'queue') return { queue: name, perKey };
  if (scope === 'kind') return { kind: name };
  if (scope === 'destination') return { destination: name };
  throw new UsageError('the first word is queue, kind or destination');
}

const whatText = (scope: RateLimitScope, name: string) =>
  scope === 'key'
    ? `each concurrency key of queue ${name}`
    : scope === 'destination' && name === '*'
      ? 'each destination without a rate of its own'
      : `${scope} ${name}`;

const scopeLabel = (scope: RateLimitScope) => (scope === 'key' ? 'per key' : scope);

export const RATE_COMMANDS: Record<string, (ctx: CommandContext) => Promise<number>> = {
  async 'rate-limits'({ conn, schema, emit, registry }) {
    const { rateLimits: set, use } = await rateLimits(conn, { schema });
    const declared = registry ? declaredRateLimits(registry.all()) : [];
    const rows = [
      ...set.map((r) => ({
        'rate limit': scopeLabel(r.scope),
        name: r.name,
        rate: rateText(r),
        source: 'run time',
        'set by': `${r.setBy} ${age((Date.now() - r.setAt.getTime()) / 1000)} ago${r.reason ? `: ${r.reason}` : ''}`,
      })),
      ...declared
        .filter((d) => !set.some((r) => r.scope === d.scope && r.name === d.name))
        .map((d) => ({
          'rate limit': scopeLabel(d.scope),
          name: d.name,
          rate: rateText(d),
          source: 'code',
          'set by': '',
        })),
    ];
    const rates =
      rows.length === 0
        ? `no run-time rate limits${registry ? ' and none in the code' : ' (pass --jobs to list the rates the code declares)'}`
        : table(rows, ['rate limit', 'name', 'rate', 'source', 'set by']);
    const inUse = use.length === 0 ? '' : `\n\n${rateUseTable(use)}`;
    emit(`${rates}${inUse}`, { runTime: set, declared, use });
    return EXIT.ok;
  },
  async 'rate-limits set'(ctx) {
    const [scope, name, rateArg, extra] = ctx.rest;
    if (rateArg === undefined || extra !== undefined) {
      throw new UsageError(
        'needs queue|kind|destination, a name and a rate, e.g. `rate-limits set destination api.example.com 10/s`',
      );
    }
    const rate = parseRate(rateArg);
    if (!rate) throw new UsageError(`the rate must look like 10/s, 100/min, 5/2s or 1000/h, not "${rateArg}"`);
    const { rateLimit, previous } = await setRateLimit(ctx.conn, targetOf(ctx, scope, name), rate, {
      schema: ctx.schema,
      by: operator(ctx),
      reason: str(ctx.o.reason),
    });
    ctx.emit(
      `at most ${rateText(rateLimit)} starts for ${whatText(rateLimit.scope, rateLimit.name)} from the next claim on` +
        `${previous === null ? '' : ` (was ${rateText(previous)})`}`,
      { rateLimit, previous },
    );
    return EXIT.ok;
  },
  async 'rate-limits clear'(ctx) {
    const [scope, name, extra] = ctx.rest;
    if (extra !== undefined) throw new UsageError('needs queue|kind|destination and a name');
    const target = targetOf(ctx, scope, name);
    const ended = await clearRateLimit(ctx.conn, target, { schema: ctx.schema });
    const what = whatText(ctx.o['per-key'] ? 'key' : (scope as RateLimitScope), name as string);
    ctx.emit(
      ended
        ? `cleared the run-time rate of ${what} (was ${rateText(ended)}); the code's rate, if any, applies again`
        : `${what} had no run-time rate`,
      { cleared: ended !== null, rateLimit: ended },
    );
    return EXIT.ok;
  },
};

export const RATE_SUBCOMMANDS = ['rate-limits'];

/** The rate-limited scopes that started jobs within their period, for `rate-limits` and `stats`. */
export function rateUseTable(use: readonly RateUse[]): string {
  return `starts within their period (busiest first):\n${table(
    use.map((u) => ({
      scope: scopeLabel(u.scope),
      name: u.name,
      key: u.key,
      starts: String(u.used),
      'next token': u.nextTokenAt
        ? `${u.nextTokenAt.toISOString()} (${age(Math.max(0, u.nextTokenAt.getTime() - Date.now()) / 1000)} from now)`
        : '',
    })),
    ['scope', 'name', 'key', 'starts', 'next token'],
  )}`;
}
