import { type SQL, sql } from 'drizzle-orm';
import type { DeclaredWindow } from '../../base/controls.js';

export type { DeclaredWindow } from '../../base/controls.js';

/**
 * The claim's CTE `closed` (kinds, queues): the declared windows that are shut at `now`, read in
 * each window's time zone on the database's clock. One row.
 */
export function closedWindowsCte(windows: readonly DeclaredWindow[], now: SQL): SQL {
  const col = <T>(f: (w: DeclaredWindow) => T) => sql.param(windows.map(f));
  return sql`closed as (
      select coalesce(array_agg(w.name) filter (where w.scope = 'kind'), '{}') as kinds,
        coalesce(array_agg(w.name) filter (where w.scope = 'queue'), '{}') as queues
      from unnest(${col((w) => w.scope)}::text[], ${col((w) => w.name)}::text[], ${col((w) => w.startMinute)}::int[],
          ${col((w) => w.endMinute)}::int[], ${col((w) => w.timezone)}::text[]) as w(scope, name, s, e, tz)
      cross join lateral (select (extract(hour from ${now} at time zone w.tz) * 60
        + extract(minute from ${now} at time zone w.tz))::int as m) t
      where not (case when w.s < w.e then t.m >= w.s and t.m < w.e else t.m >= w.s or t.m < w.e end)
    )`;
}

/**
 * The condition that window `w` (columns s, e: minutes of the day; tz) is open at `at`, read on the
 * wall clock of its time zone; `e` before `s` wraps past midnight. The same test as the claim's
 * `closed` (which reads the minute once for its single `now`).
 */
export function windowOpenAt(at: SQL, w: SQL): SQL {
  const minute = sql`(extract(hour from ${at} at time zone ${w}.tz) * 60 + extract(minute from ${at} at time zone ${w}.tz))::int`;
  return sql`(case when ${w}.s < ${w}.e then ${minute} >= ${w}.s and ${minute} < ${w}.e
    else ${minute} >= ${w}.s or ${minute} < ${w}.e end)`;
}

/** The condition that job `j` is in no shut window (with closedWindowsCte). */
export const inWindow = () =>
  sql`j.kind <> all(coalesce((select c.kinds from closed c), '{}'::text[]))
    and j.queue <> all(coalesce((select c.queues from closed c), '{}'::text[]))`;
