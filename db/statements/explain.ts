import { type SQL, sql } from 'drizzle-orm';
import type { DeclaredLimit, DeclaredRateLimit, DeclaredWindow } from '../../base/controls.js';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, holdsKey, jobsRef, nowExpr } from './common.js';
import { effectiveLimitsCte } from './limits.js';
import { bucketsRef, effectiveRateLimitsCte, recentStarts } from './rate-limits.js';
import { windowOpenAt } from './windows.js';

/** Everything that may hold one job back, read in one statement (JobExplain). */
export interface ExplainEvidence {
  nowMs: number;
  job: {
    id: string;
    kind: string;
    queue: string;
    state: string;
    priority: number;
    attempt: number;
    maxAttempts: number;
    runAtMs: number | null;
    deadlineMs: number | null;
    leaseExpiresAtMs: number | null;
    lockedBy: string | null;
    orderingKey: string | null;
    concurrencyKey: string | null;
    destination: string | null;
    deadReason: string | null;
    finishedAtMs: number | null;
  } | null;
  pauses: { scope: string; name: string; pausedAtMs: number; pausedBy: string; reason: string | null }[];
  limits: { scope: string; name: string; maxRunning: number; running: number }[];
  rates: { scope: string; name: string; maxStarts: number; periodMs: number; used: number; nextAtMs: number | null }[];
  /** The declared run windows that apply to the job and are shut now, each with when it next opens. */
  windowsShut: { scope: 'kind' | 'queue'; name: string; opensAtMs: number | null }[];
  destination: { state: string; openUntilMs: number | null; deferredUntilMs: number | null } | null;
  orderingHolder: { id: string; state: string } | null;
  parents: { id: string; state: string | null }[];
  lastStep: { name: string; type: string; state: string; signalKey: string | null; timeoutAtMs: number | null } | null;
  /**
   * known: some worker recorded itself in the last day; serving: one served the job's queue and kind
   * in the last 10 minutes; fitting: one of those has invocations long enough for its kind's timeoutMs
   * (or did not record its unfit kinds); budgetMs: the longest time one of them had for attempts.
   */
  workers: { known: boolean; serving: boolean; fitting: boolean; budgetMs: number | null };
  readyAhead: number | null;
}

/** What the code declares (the caller's kinds): limits, rates and windows the database does not hold. */
export interface DeclaredRules {
  limits: readonly DeclaredLimit[];
  rateLimits: readonly DeclaredRateLimit[];
  windows: readonly DeclaredWindow[];
}

const NONE: DeclaredRules = { limits: [], rateLimits: [], windows: [] };

/**
 * Reads, for one job, each rule that could hold it and its evidence: its own row, the pauses of its
 * queue and kind, the concurrency limits and rates that apply (the table's, over the code's when
 * given) with their running jobs and recent starts, shut windows, its destination's breaker, the job
 * holding its ordering key, its parents, its last durable step, the workers that serve it, and how
 * many ready jobs are ahead of it. One statement; every part reads a few rows by index.
 */
export async function explainJob(
  db: Executor,
  schema: string,
  job: { id: string; kind: string },
  declared: DeclaredRules = NONE,
  now?: Date,
): Promise<ExplainEvidence> {
  const { id } = job;
  const jobs = jobsRef(schema);
  const s = sql.identifier(schema);
  const clock = nowExpr(now);
  // The rules as a claim of this job's kind sees them (each is matched to the job below).
  const limitsCte = effectiveLimitsCte(schema, { declared: declared.limits, kinds: [job.kind] });
  const ratesCte = effectiveRateLimitsCte(schema, { declared: declared.rateLimits, kinds: [job.kind] });
  const windows = shutWindowsCte(declared.windows);
  const rows = await queryRows<{ evidence: Record<string, unknown> }>(
    db,
    sql`with clock as (select ${clock} as now),
    j as (select * from ${jobs} where id = ${id}),
    ${limitsCte},
    ${ratesCte},
    ${windows}
    select json_build_object(
      'nowMs', ${epochMs(sql`(select now from clock)`)},
      'job', (select json_build_object('id', j.id::text, 'kind', j.kind, 'queue', j.queue, 'state', j.state,
        'priority', j.priority, 'attempt', j.attempt, 'maxAttempts', j.max_attempts,
        'runAtMs', case when j.run_at = 'infinity' then null else ${epochMs(sql`j.run_at`)} end,
        'deadlineMs', ${epochMs(sql`j.deadline`)}, 'leaseExpiresAtMs', ${epochMs(sql`j.lease_expires_at`)},
        'lockedBy', j.locked_by, 'orderingKey', j.ordering_key, 'concurrencyKey', j.concurrency_key,
        'destination', j.destination, 'deadReason', j.dead_reason, 'finishedAtMs', ${epochMs(sql`j.finished_at`)}) from j),
      'pauses', coalesce((select json_agg(json_build_object('scope', p.scope, 'name', p.name,
          'pausedAtMs', ${epochMs(sql`p.paused_at`)}, 'pausedBy', p.paused_by, 'reason', p.reason))
        from ${s}.pauses p, j where (p.scope = 'queue' and p.name = j.queue) or (p.scope = 'kind' and p.name = j.kind)), '[]'),
      'limits', coalesce((select json_agg(json_build_object('scope', l.scope, 'name', l.name, 'maxRunning', l.max_running,
          'running', (select count(*) from ${jobs} r where r.state = 'running' and r.lease_expires_at is not null
            and case l.scope when 'queue' then r.queue = j.queue when 'kind' then r.kind = j.kind
              else r.queue = j.queue and r.concurrency_key = j.concurrency_key end)))
        from lim l, j where (l.scope = 'queue' and l.name = j.queue) or (l.scope = 'kind' and l.name = j.kind)
          or (l.scope = 'key' and l.name = j.queue and j.concurrency_key is not null)), '[]'),
      'rates', coalesce((select json_agg(json_build_object('scope', r.scope, 'name', r.name, 'maxStarts', r.max_starts,
          'periodMs', r.period_ms, 'used', coalesce(u.used, 0),
          'nextAtMs', case when coalesce(u.used, 0) >= r.max_starts then ${epochMs(sql`u.oldest + r.period_ms * interval '1 millisecond'`)} end))
        from rlim r cross join j
        left join ${bucketsRef(schema)} b on b.scope = r.scope and b.name = r.name
          and b.key = case when r.scope = 'key' then j.concurrency_key else '' end
        left join lateral ${recentStarts(sql`(select now from clock)`, sql`r.period_ms`)} u on true
        where (r.scope = 'queue' and r.name = j.queue) or (r.scope = 'kind' and r.name = j.kind)
          or (r.scope = 'destination' and r.name = j.destination)
          or (r.scope = 'key' and r.name = j.queue and j.concurrency_key is not null)), '[]'),
      'windowsShut', coalesce((select json_agg(json_build_object('scope', w.scope, 'name', w.name, 'opensAtMs', w.opens_at_ms))
        from shut w, j where (w.scope = 'kind' and w.name = j.kind) or (w.scope = 'queue' and w.name = j.queue)), '[]'),
      'destination', (select json_build_object('state', d.state, 'openUntilMs', ${epochMs(sql`d.open_until`)},
          'deferredUntilMs', case when d.deferred_until > (select now from clock) then ${epochMs(sql`d.deferred_until`)} end)
        from ${s}.destinations d, j where d.name = j.destination),
      'orderingHolder', (select json_build_object('id', o.id::text, 'state', o.state) from ${jobs} o, j
        where j.ordering_key is not null and o.ordering_key = j.ordering_key and o.id <> j.id and o.id < j.id
          and ${holdsKey('o')} order by o.id limit 1),
      'parents', coalesce((select json_agg(json_build_object('id', a.id::text, 'state', p.state) order by a.ord)
        from j cross join unnest(j.after) with ordinality as a(id, ord) left join ${jobs} p on p.id = a.id), '[]'),
      'lastStep', (select json_build_object('name', st.name, 'type', st.type, 'state', st.state, 'signalKey', st.signal_key,
          'timeoutAtMs', ${epochMs(sql`st.timeout_at`)})
        from ${s}.job_steps st, j where st.job_id = j.id order by st.position desc limit 1),
      'workers', (select json_build_object(
          'known', exists (select 1 from ${s}.workers w where w.seen_at > (select now from clock) - interval '1 day'),
          'serving', count(*) > 0,
          'fitting', coalesce(bool_or(not coalesce(j.kind = any(w.unfit_kinds), false)), false),
          'budgetMs', max(w.budget_ms))
        from ${s}.workers w, j where w.seen_at > (select now from clock) - interval '10 minutes'
          and j.kind = any(w.kinds) and (w.queues is null or j.queue = any(w.queues))),
      'readyAhead', (select count(*) from (select 1 from ${jobs} a, j
        where j.state = 'queued' and j.run_at <= (select now from clock) and a.state = 'queued' and a.queue = j.queue
          and a.run_at <= (select now from clock) and (a.priority, a.run_at, a.id) < (j.priority, j.run_at, j.id)
          -- A job of a paused kind is not ready (its own explain says so), and no claim takes it.
          and not exists (select 1 from ${s}.pauses p where p.scope = 'kind' and p.name = a.kind)
        limit 10000) x)
    ) as evidence`,
    schema,
  );
  return rows[0]?.evidence as unknown as ExplainEvidence;
}

/**
 * CTE `shut` (scope, name, opens_at_ms): each declared window that is shut at the clock's `now`, with
 * the first minute from then on at which it is open — found by testing each minute of the next 25
 * hours in the window's time zone, so a start that falls in a DST gap or fold is still exact.
 */
function shutWindowsCte(windows: readonly DeclaredWindow[]): SQL {
  if (windows.length === 0)
    return sql`shut as (select null::text as scope, null::text as name, null::float8 as opens_at_ms where false)`;
  const col = <T>(f: (w: DeclaredWindow) => T) => sql.param(windows.map(f));
  const now = sql`(select now from clock)`;
  return sql`shut as (
      select w.scope, w.name, (select ${epochMs(sql`m.at`)} from generate_series(1, 1500) as k(n)
          cross join lateral (select date_trunc('minute', ${now}) + k.n * interval '1 minute' as at) m
          where ${windowOpenAt(sql`m.at`, sql`w`)} order by k.n limit 1) as opens_at_ms
      from unnest(${col((w) => w.scope)}::text[], ${col((w) => w.name)}::text[], ${col((w) => w.startMinute)}::int[],
          ${col((w) => w.endMinute)}::int[], ${col((w) => w.timezone)}::text[]) as w(scope, name, s, e, tz)
      where not ${windowOpenAt(now, sql`w`)}
    )`;
}
