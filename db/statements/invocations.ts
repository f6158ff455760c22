import { sql } from 'drizzle-orm';
import { queryHotRows, queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { jobsRef, nowExpr } from './common.js';
import { notPaused } from './pauses.js';

const invocationsRef = (schema: string) => sql`${sql.identifier(schema)}.invocations`;

export interface Registration {
  /** The slot this invocation holds, or null when every slot was held (or taken under it). */
  slot: number | null;
  /** Unexpired registrations of this worker when the statement began, not counting this one. */
  running: number;
}

/**
 * Registers a running invocation of `worker` in one of `max` slots (InvocationRegister). A slot is
 * free when it has no row or its row expired; the primary key (worker, slot) makes the cap hold
 * when several invocations register at once: two that pick the same free slot meet on the key, and
 * the second finds it taken (ON CONFLICT … WHERE re-checks the row it waited for) and gets null —
 * it may try again with a fresh look. The free slot is drawn at random so that registrants that
 * start together rarely pick the same one. The row expires on its own after `ttlMs`: a crashed
 * invocation stops counting without any cleanup.
 */
export async function registerInvocation(
  db: Executor,
  schema: string,
  request: { worker: string; invocationId: string; max: number; ttlMs: number; now?: Date },
): Promise<Registration> {
  const invocations = invocationsRef(schema);
  // A hot statement (cheap: its plan reads the primary key of a small table): on pg a named statement
  // whose plan the connection keeps, so a warm instance does not plan it at each invocation again.
  const rows = await queryHotRows<{ slot: number | null; running: number }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now),
    held as (
      select i.slot from ${invocations} i
      where i.worker = ${request.worker} and i.expires_at > (select now from clock)
    ),
    free as (
      select s.slot from generate_series(1, ${request.max}::int) as s(slot)
      where s.slot not in (select slot from held)
      order by random()
      limit 1
    ),
    taken as (
      insert into ${invocations} (worker, slot, invocation_id, started_at, expires_at)
      select ${request.worker}, f.slot, ${request.invocationId}, c.now,
        c.now + ${Math.max(1, Math.round(request.ttlMs))} * interval '1 millisecond'
      from free f, clock c
      on conflict (worker, slot) do update set
        invocation_id = excluded.invocation_id,
        started_at = excluded.started_at,
        expires_at = excluded.expires_at
      where ${invocations}.expires_at <= excluded.started_at
      returning slot
    )
    select (select slot from taken)::int as slot, (select count(*) from held)::int as running`,
    schema,
    { cheap: true },
  );
  return { slot: rows[0]?.slot ?? null, running: rows[0]?.running ?? 0 };
}

/** Frees an invocation's slot as it returns (InvocationUnregister); a crashed one's slot expires instead. */
export async function unregisterInvocation(
  db: Executor,
  schema: string,
  request: { worker: string; invocationId: string },
): Promise<void> {
  await queryRows(
    db,
    sql`delete from ${invocationsRef(schema)} where worker = ${request.worker} and invocation_id = ${request.invocationId}`,
    schema,
  );
}

export interface Backlog {
  /** Jobs ready to run now for these kinds and queues, counted up to `cap`. */
  ready: number;
  /** Unexpired registrations of `worker`, this invocation's included. */
  running: number;
  /**
   * The slot of the oldest registration: its holder is the one that fans out (null when none is
   * held). The oldest, not the lowest slot: slots are drawn at random, and the invocations a leader
   * started must not take the decision over while they arrive — the new leader would not know they
   * are on their way, and would start them again.
   */
  leaderSlot: number | null;
}

/**
 * How much ready work waits and how many invocations of `worker` run (BacklogRead), in one
 * statement: the ready jobs are counted through the claim index and never past `cap`, so the read
 * costs the same with a backlog of a thousand or of ten million.
 */
export async function readBacklog(
  db: Executor,
  schema: string,
  request: { worker: string; kinds: readonly string[]; queues?: readonly string[]; cap: number; now?: Date },
): Promise<Backlog> {
  const queueFilter = request.queues ? sql`and j.queue = any(${sql.param(request.queues)}::text[])` : sql``;
  const ready = sql`j.state = 'queued' and j.run_at <= (select now from clock)
    and j.kind = any(${sql.param(request.kinds)}::text[]) ${queueFilter} and ${notPaused(schema)}`;
  const rows = await queryRows<{ ready: number; running: number; leader_slot: number | null }>(
    db,
    sql`with clock as (select ${nowExpr(request.now)} as now)
    select
      (select count(*) from (
        -- Jobs without a concurrency key through the claim index, then keyed ones through theirs.
        select 1 from ${jobsRef(schema)} j where ${ready} and j.concurrency_key is null
        union all
        select 1 from ${jobsRef(schema)} j where ${ready} and j.concurrency_key is not null
        limit ${Math.max(1, Math.round(request.cap))}
      ) r)::int as ready,
      (select count(*) from ${invocationsRef(schema)} i
        where i.worker = ${request.worker} and i.expires_at > (select now from clock))::int as running,
      (select i.slot from ${invocationsRef(schema)} i
        where i.worker = ${request.worker} and i.expires_at > (select now from clock)
        order by i.started_at, i.slot limit 1)::int as leader_slot`,
    schema,
  );
  const row = rows[0];
  return { ready: row?.ready ?? 0, running: row?.running ?? 0, leaderSlot: row?.leader_slot ?? null };
}
