import { sql } from 'drizzle-orm';
import type { DeclaredRateLimit, RateLimitScope } from '../../base/controls.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, toDate } from './common.js';
import { bucketsRef, ms, type RateLimitOverride, rateLimitsRef, recentStarts } from './rate-limits.js';

// The run-time rate limits an operator sets, clears and lists (the CLI, the control route, the
// console); the claim reads them through effectiveRateLimitsCte (rate-limits.ts).

type RateRow = {
  scope: RateLimitScope;
  name: string;
  max_starts: number;
  period_ms: number;
  set_at_ms: number;
  set_by: string;
  reason: string | null;
};
const toOverride = (r: RateRow): RateLimitOverride => ({
  scope: r.scope,
  name: r.name,
  maxStarts: r.max_starts,
  periodMs: r.period_ms,
  setAt: toDate(r.set_at_ms) as Date,
  setBy: r.set_by,
  reason: r.reason,
});
// A function, not a constant (bundles initialise drizzle lazily: see pauses.ts).
const returning = () => sql`scope, name, max_starts, period_ms, ${epochMs(sql`set_at`)} as set_at_ms, set_by, reason`;

/** Sets a run-time rate (RateLimitSet), replacing any earlier one of the same scope and name. */
export async function setRateLimit(
  db: Executor,
  schema: string,
  request: DeclaredRateLimit & { by: string; reason?: string; now?: Date },
): Promise<{ rateLimit: RateLimitOverride; previous: { maxStarts: number; periodMs: number } | null }> {
  const ref = rateLimitsRef(schema);
  const rows = await queryRows<RateRow & { previous_max: number | null; previous_period: number | null }>(
    db,
    sql`with old as (select max_starts, period_ms from ${ref} where scope = ${request.scope} and name = ${request.name})
    insert into ${ref} as l (scope, name, max_starts, period_ms, set_at, set_by, reason)
      values (${request.scope}, ${request.name}, ${request.maxStarts}, ${request.periodMs}, ${nowExpr(request.now)},
        ${request.by}, ${request.reason ?? null})
      on conflict (scope, name) do update
        set max_starts = excluded.max_starts, period_ms = excluded.period_ms, set_at = excluded.set_at,
          set_by = excluded.set_by, reason = excluded.reason
      returning ${returning()}, (select max_starts from old) as previous_max, (select period_ms from old) as previous_period`,
    schema,
  );
  const row = rows[0] as RateRow & { previous_max: number | null; previous_period: number | null };
  return {
    rateLimit: toOverride(row),
    previous:
      row.previous_max === null ? null : { maxStarts: row.previous_max, periodMs: row.previous_period as number },
  };
}

/** Removes a run-time rate (RateLimitClear): the code's rate, if any, applies again. Returns the one removed, or null. */
export async function clearRateLimit(
  db: Executor,
  schema: string,
  request: { scope: RateLimitScope; name: string },
): Promise<RateLimitOverride | null> {
  const rows = await queryRows<RateRow>(
    db,
    sql`delete from ${rateLimitsRef(schema)} where scope = ${request.scope} and name = ${request.name}
      returning ${returning()}`,
    schema,
  );
  return rows[0] ? toOverride(rows[0]) : null;
}

/** How a rate-limited scope stands now: its starts over the last period and when the next token comes back. */
export interface RateUse {
  scope: RateLimitScope;
  name: string;
  /** The concurrency key (scope `key`) or the destination (a `*` rate); '' otherwise. */
  key: string;
  /** Starts within the last period. */
  used: number;
  /** When the oldest of them leaves the period (a token comes back); null when none is recent. */
  nextTokenAt: Date | null;
}

/**
 * The run-time rates (RateLimitList), and the use of every scope that started jobs within the last
 * `periodMs` of its rate — busiest first, at most `limit` (declared rates' scopes too).
 */
export async function listRateLimits(
  db: Executor,
  schema: string,
  request: { now?: Date; limit?: number } = {},
): Promise<{ rateLimits: RateLimitOverride[]; use: RateUse[] }> {
  const now = nowExpr(request.now);
  const overrides = await queryRows<RateRow>(
    db,
    sql`select ${returning()} from ${rateLimitsRef(schema)} order by scope, name`,
    schema,
  );
  const use = await queryRows<{
    scope: RateLimitScope;
    name: string;
    key: string;
    used: number;
    next_ms: number | null;
  }>(
    db,
    sql`select b.scope, b.name, b.key, r.used::int as used, ${epochMs(sql`r.oldest + ${ms(sql`b.period_ms`)}`)} as next_ms
      from ${bucketsRef(schema)} b
      cross join lateral ${recentStarts(now, sql`b.period_ms`)} r
      where r.used > 0
      order by r.used desc, b.scope, b.name, b.key
      limit ${request.limit ?? 50}`,
    schema,
  );
  return {
    rateLimits: overrides.map(toOverride),
    use: use.map((u) => ({ scope: u.scope, name: u.name, key: u.key, used: u.used, nextTokenAt: toDate(u.next_ms) })),
  };
}
