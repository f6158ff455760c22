import { sql } from 'drizzle-orm';
import type { DeclaredLimit, LimitScope } from '../../base/controls.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, runningRow, toDate } from './common.js';
import { type LimitOverride, limitsRef } from './limits.js';

// The run-time concurrency limits an operator sets, clears and lists (the CLI, the control route,
// the console); the claim reads them through effectiveLimitsCte (limits.ts).

type LimitRow = {
  scope: LimitScope;
  name: string;
  max_running: number;
  set_at_ms: number;
  set_by: string;
  reason: string | null;
};
const toOverride = (r: LimitRow): LimitOverride => ({
  scope: r.scope,
  name: r.name,
  maxRunning: r.max_running,
  setAt: toDate(r.set_at_ms) as Date,
  setBy: r.set_by,
  reason: r.reason,
});
// A function, not a constant (see pauses.ts: bundles initialise drizzle lazily).
const returning = () => sql`scope, name, max_running, ${epochMs(sql`set_at`)} as set_at_ms, set_by, reason`;

/** Sets a run-time limit (LimitSet), replacing any earlier one of the same scope and name. */
export async function setLimit(
  db: Executor,
  schema: string,
  request: DeclaredLimit & { by: string; reason?: string; now?: Date },
): Promise<{ limit: LimitOverride; previous: number | null }> {
  const rows = await queryRows<LimitRow & { previous: number | null }>(
    db,
    sql`with old as (select max_running from ${limitsRef(schema)} where scope = ${request.scope} and name = ${request.name})
    insert into ${limitsRef(schema)} as l (scope, name, max_running, set_at, set_by, reason)
      values (${request.scope}, ${request.name}, ${request.maxRunning}, ${nowExpr(request.now)}, ${request.by},
        ${request.reason ?? null})
      on conflict (scope, name) do update
        set max_running = excluded.max_running, set_at = excluded.set_at, set_by = excluded.set_by, reason = excluded.reason
      returning ${returning()}, (select max_running from old) as previous`,
    schema,
  );
  const row = rows[0] as LimitRow & { previous: number | null };
  return { limit: toOverride(row), previous: row.previous };
}

/** Removes a run-time limit (LimitClear): the code's limit, if any, applies again. Returns the one removed, or null. */
export async function clearLimit(
  db: Executor,
  schema: string,
  request: { scope: LimitScope; name: string },
): Promise<LimitOverride | null> {
  const rows = await queryRows<LimitRow>(
    db,
    sql`delete from ${limitsRef(schema)} where scope = ${request.scope} and name = ${request.name} returning ${returning()}`,
    schema,
  );
  return rows[0] ? toOverride(rows[0]) : null;
}

/** The run-time limits, each with how many jobs its scope runs now (LimitList). */
export async function listLimits(
  db: Executor,
  schema: string,
): Promise<(LimitOverride & { running: number; busiestKey: string | null })[]> {
  const jobs = sql`${sql.identifier(schema)}.jobs`;
  const rows = await queryRows<LimitRow & { running: number; busiest_key: string | null }>(
    db,
    sql`select ${returning()}, coalesce(r.running, 0)::int as running, r.busiest_key from ${limitsRef(schema)} l
      left join lateral (
        -- The scope's running jobs; for a per-key limit, those of its busiest key.
        select count(*) as running, case when l.scope = 'key' then j.concurrency_key end as busiest_key
        from ${jobs} j
        where ${runningRow('j')}
          and case l.scope when 'queue' then j.queue = l.name when 'kind' then j.kind = l.name
            else j.queue = l.name and j.concurrency_key is not null end
        group by case when l.scope = 'key' then j.concurrency_key end
        order by count(*) desc, 2
        limit 1
      ) r on true
      order by l.scope, l.name`,
    schema,
  );
  return rows.map((r) => ({ ...toOverride(r), running: r.running, busiestKey: r.busiest_key }));
}
