import { type SQL, sql } from 'drizzle-orm';
import { queryRows, toSkiplockError } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, jobsRef, nowExpr } from './common.js';

/**
 * Signals and the waits for them (`signal()`, `ctx.waitForSignal`). A send and a wait on the same
 * key never miss each other: each runs as [signalLock, its statement] in one transaction, so the
 * second to take the key's lock starts its statement after the first committed and sees its row —
 * the sender the waiting step (and wakes its job), the waiter the signal (and takes it). Without
 * the lock, a wait that committed while a send was in flight would sleep until its timeout.
 */

const signalsRef = (schema: string): SQL => sql`${sql.identifier(schema)}.signals`;
const stepsRef = (schema: string): SQL => sql`${sql.identifier(schema)}.job_steps`;

/**
 * The transaction-scoped lock on one key of one schema (first statement of a send or a wait). It
 * returns a boolean column, not the function's void: some clients (Prisma's raw queries) cannot
 * read a void column and fail the statement.
 */
export function signalLock(schema: string, key: string): SQL {
  return sql`select true as locked from pg_advisory_xact_lock(hashtextextended(${`skiplock.signal:${schema}:${key}`}, 0))`;
}

/**
 * Runs signalLock on `key`, then `statement`, in one transaction and returns the statement's rows
 * (Executor.batch: a transaction of its own, a savepoint inside the caller's, one request on
 * neon-http, or the caller's transaction through a queryExecutor). A send and a wait both go through it.
 */
export async function queryUnderSignalLock<T>(db: Executor, schema: string, key: string, statement: SQL): Promise<T[]> {
  try {
    const [, rows] = await db.batch([signalLock(schema, key), statement]);
    return (rows ?? []) as T[];
  } catch (err) {
    throw toSkiplockError(err, schema);
  }
}

/**
 * Stores a signal and wakes the jobs waiting on its key (SignalSend); run after signalLock in the
 * sender's transaction. Returns the signal's id, how many waiting jobs it woke and their queues.
 * With `tokenId` (a callback token's id, or `id:` and the sender's own id), one already stored
 * stores nothing and wakes no one: `sent` is false and `id` is the stored signal's.
 */
export function sendSignalStatement(
  schema: string,
  key: string,
  payloadJson: string | null,
  tokenId?: string,
  now?: Date,
): SQL {
  const clock = nowExpr(now);
  const stored =
    tokenId === undefined
      ? sql`(select id from sent)`
      : sql`coalesce((select id from sent), (select g.id from ${signalsRef(schema)} g where g.token_id = ${tokenId}))`;
  return sql`with sent as (
      insert into ${signalsRef(schema)} (key, payload, sent_at, token_id)
      values (${key}, ${payloadJson}::text::jsonb, ${clock}, ${tokenId ?? null})
      ${tokenId === undefined ? sql`` : sql`on conflict (token_id) where token_id is not null do nothing`}
      returning id
    ),
    woken as (
      update ${jobsRef(schema)} j set run_at = ${clock}, updated_at = ${clock}
      from ${stepsRef(schema)} s
      where s.state = 'waiting' and s.signal_key = ${key} and j.id = s.job_id and j.state = 'queued' and j.run_at > ${clock}
        and exists (select 1 from sent)
      returning j.id, j.queue
    )
    select ${stored}::text as id, exists (select 1 from sent) as sent, (select count(*) from woken)::int as woken,
      (select coalesce(array_agg(distinct queue order by queue), '{}') from woken) as queues`;
}

export interface SendSignalRow {
  id: string | null;
  sent: boolean;
  woken: number;
  queues: string[] | null;
}

/** One wait for a signal, as the step that holds it. */
export interface WaitStep {
  name: string;
  position: number;
  key: string;
  timeoutMs: number;
}

/**
 * A job reaches a wait (SignalWait), after signalLock, fenced on its lease (the job's row stays
 * locked to the commit). It takes the key's oldest signal not yet taken, if there is one (the step
 * completes with its payload); else, when the wait's timeout has passed, the step completes as
 * timed out; else the job goes back to the queue until the timeout, without using an attempt (a
 * signal wakes it sooner), its step 'waiting'. `outcome` is null when the lease was lost.
 */
export function waitStatement(
  schema: string,
  job: { id: string; leaseToken: string },
  wait: WaitStep,
  now?: Date,
): SQL {
  const clock = nowExpr(now);
  const steps = stepsRef(schema);
  return sql`with held as (
      select j.id from ${jobsRef(schema)} j
      where j.id = ${job.id} and j.lease_token = ${job.leaseToken} and j.state = 'running'
      for no key update
    ),
    pending as (
      select g.id from ${signalsRef(schema)} g, held
      where g.key = ${wait.key} and g.taken_by is null order by g.id limit 1
    ),
    taken as (
      update ${signalsRef(schema)} g set taken_by = ${job.id}, taken_at = ${clock}
      from pending p where g.id = p.id
      returning g.payload
    ),
    timeout as (
      select coalesce(
        (select s.timeout_at from ${steps} s where s.job_id = ${job.id} and s.name = ${wait.name} and s.state = 'waiting'),
        ${clock} + ${Math.max(0, Math.round(wait.timeoutMs))} * interval '1 millisecond') as at
    ),
    decided as (
      select case when exists (select 1 from pending) then 'signal'
        when (select at from timeout) <= ${clock} then 'timeout' else 'wait' end as outcome
      from held
    ),
    step as (
      insert into ${steps} as s (job_id, name, position, type, state, attempts, result, started_at, finished_at, signal_key, timeout_at)
      select h.id, ${wait.name}, ${wait.position}, 'signal',
        case d.outcome when 'wait' then 'waiting' else 'completed' end, 1,
        case d.outcome when 'signal' then jsonb_build_object('payload', (select payload from taken))
          when 'timeout' then '{"timedOut":true}'::jsonb end,
        ${clock}, case when d.outcome = 'wait' then null else ${clock} end, ${wait.key}, (select at from timeout)
      from held h, decided d
      on conflict (job_id, name) do update set
        state = excluded.state, result = excluded.result, finished_at = excluded.finished_at
      returning 1
    ),
    released as (
      update ${jobsRef(schema)} j set
        lease_token = ${job.leaseToken},
        state = 'queued',
        attempt = j.attempt - 1,
        run_at = (select at from timeout),
        started_at = case when j.attempt - 1 = 0 then null else j.started_at end,
        lease_expires_at = null,
        updated_at = ${clock}
      from decided d
      where d.outcome = 'wait' and j.id = ${job.id}
      returning j.run_at
    )
    select d.outcome, (select payload::text from taken) as payload_json,
      (select ${epochMs(sql`run_at`)} from released) as run_at_ms
    from decided d where (select count(*) from step) >= 0`;
}

export interface WaitRow {
  outcome: 'signal' | 'timeout' | 'wait';
  payload_json: string | null;
  run_at_ms: number | null;
}

/** Deletes taken signals older than `takenBefore` and untaken ones older than `sentBefore` (SignalsPrune). */
export async function pruneSignals(
  db: Executor,
  schema: string,
  takenBefore: Date,
  sentBefore: Date,
  limit: number,
): Promise<number> {
  const rows = await queryRows<{ n: number }>(
    db,
    pruneSignalsStatement(schema, takenBefore, sentBefore, limit),
    schema,
  );
  return Number(rows[0]?.n ?? 0);
}

function pruneSignalsStatement(schema: string, takenBefore: Date, sentBefore: Date, limit: number): SQL {
  return sql`with old as (
      select id from ${signalsRef(schema)}
      where (taken_at is not null and taken_at < ${takenBefore.toISOString()}::timestamptz)
        or (taken_at is null and sent_at < ${sentBefore.toISOString()}::timestamptz)
      limit ${limit}
    ),
    deleted as (delete from ${signalsRef(schema)} g using old where g.id = old.id returning 1)
    select count(*)::int as n from deleted`;
}
