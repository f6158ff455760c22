import { type SQL, sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, nowExpr, toDate } from './common.js';

export type PauseScope = 'queue' | 'kind';

export interface Pause {
  scope: PauseScope;
  name: string;
  pausedAt: Date;
  pausedBy: string;
  reason: string | null;
}

const pausesRef = (schema: string) => sql`${sql.identifier(schema)}.pauses`;

/**
 * The claim's condition that job `j` is in no paused queue and of no paused kind. The paused names
 * are read once per statement (two InitPlans over a table of a few rows), so a claim with nothing
 * paused pays next to nothing; each candidate row is then compared with two small arrays.
 */
export function notPaused(schema: string): SQL {
  const names = (scope: PauseScope) => pausedNames(schema, scope);
  // `|| ''` hides the columns' statistics from the planner: with one queue (or kind) in the table,
  // `j.queue <> <unknown>` is estimated to keep no row, and the claim's ordered index scan under
  // LIMIT turned into a bitmap scan and sort of the whole backlog (34 ms instead of 0.7 ms for 500
  // of 50,000 ready jobs). As expressions they get the default estimate: nearly every row kept.
  return sql`(j.queue || '') <> all(${names('queue')}) and (j.kind || '') <> all(${names('kind')})`;
}

/** The paused names of one scope, as a text[] expression (never null). */
export function pausedNames(schema: string, scope: PauseScope): SQL {
  // paused_names() is planned once per session. The scalar subquery makes it an InitPlan (called
  // once, not once per row); the cast makes that an array expression: `<> all((select …))` would
  // compare with each row.
  return sql`(select ${sql.identifier(schema)}.paused_names(${scope}::text))::text[]`;
}

type PauseRow = { scope: PauseScope; name: string; paused_at_ms: number; paused_by: string; reason: string | null };
const toPause = (r: PauseRow): Pause => ({
  scope: r.scope,
  name: r.name,
  pausedAt: toDate(r.paused_at_ms) as Date,
  pausedBy: r.paused_by,
  reason: r.reason,
});
// A function, not a constant: a sql`` built at import time runs before drizzle's own module is
// initialised in a bundled function (esbuild's lazy ESM init), and the bundle fails to load.
const returning = () => sql`scope, name, ${epochMs(sql`paused_at`)} as paused_at_ms, paused_by, reason`;

/**
 * Pauses a queue or a kind (PauseSet): from the next claim on, no invocation takes its jobs; jobs
 * already running finish. Pausing what is already paused changes nothing (it stays paused since
 * the first time, by whom it was first paused). Returns the pause and whether this call made it.
 */
export async function pause(
  db: Executor,
  schema: string,
  request: { scope: PauseScope; name: string; by: string; reason?: string; now?: Date },
): Promise<{ pause: Pause; changed: boolean }> {
  // On a conflict the no-op update locks and returns the existing row (its latest version, also
  // when a concurrent pause committed it a moment ago); xmax = 0 only on a freshly inserted row.
  const rows = await queryRows<PauseRow & { inserted: boolean }>(
    db,
    sql`insert into ${pausesRef(schema)} as p (scope, name, paused_at, paused_by, reason)
      values (${request.scope}, ${request.name}, ${nowExpr(request.now)}, ${request.by}, ${request.reason ?? null})
      on conflict (scope, name) do update set scope = p.scope
      returning ${returning()}, (p.xmax = 0) as inserted`,
    schema,
  );
  const row = rows[0] as PauseRow & { inserted: boolean };
  return { pause: toPause(row), changed: row.inserted };
}

/** Resumes a paused queue or kind (PauseClear): its jobs are claimable at the next claim. Returns the pause it ended, or null. */
export async function resume(
  db: Executor,
  schema: string,
  request: { scope: PauseScope; name: string },
): Promise<Pause | null> {
  const rows = await queryRows<PauseRow>(
    db,
    sql`delete from ${pausesRef(schema)} where scope = ${request.scope} and name = ${request.name} returning ${returning()}`,
    schema,
  );
  return rows[0] ? toPause(rows[0]) : null;
}

/** Every pause, oldest first (PauseList). */
export async function listPauses(db: Executor, schema: string): Promise<Pause[]> {
  const rows = await queryRows<PauseRow>(
    db,
    sql`select ${returning()} from ${pausesRef(schema)} order by paused_at, scope, name`,
    schema,
  );
  return rows.map(toPause);
}
