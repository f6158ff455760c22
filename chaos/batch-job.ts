import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import * as z from 'zod';
import { defineBatchJob } from '../core/batches.js';
import { CHAOS_TIMEOUT_MS } from './job.js';

/** The batch kind of the harness (one job in sixteen by default, all in the plain 'chaos' queue). */
export const BATCHED_KIND = 'chaos-batched';
/** Up to this many jobs per handler call; a short batch waits up to BATCH_WAIT_MS to fill. */
export const BATCH_SIZE = 8;
export const BATCH_WAIT_MS = 20;
/** Generous, as for stepped jobs: each kill of a batch's process is a rescue (an attempt) for all its jobs. */
export const BATCHED_MAX_ATTEMPTS = 25;
/** The DLQ reason of a job the handler sends there. */
export const BATCH_DEAD_REASON = 'chaos_batch_dead';

/**
 * What the handler answers for a job: `done`; `retry_once` (retry on its first attempt, then done);
 * `left_once` (left out of the answer on its first attempt, then done); `dead`; `cancel`;
 * `die_once` (its batch's process dies before answering, on its first attempt; then done);
 * `die_after` (its batch's process dies as the answer is returned, on its first attempt; then done).
 */
export const BATCH_WANTS = ['done', 'retry_once', 'left_once', 'dead', 'cancel', 'die_once', 'die_after'] as const;
export type BatchWant = (typeof BATCH_WANTS)[number];
const WANT_SHARES: Record<Exclude<BatchWant, 'done'>, number> = {
  retry_once: 0.1,
  left_once: 0.05,
  dead: 0.05,
  cancel: 0.05,
  die_once: 0.01,
  die_after: 0.01,
};

export function drawBatchWant(random: () => number): BatchWant {
  let roll = random();
  for (const [want, share] of Object.entries(WANT_SHARES)) {
    if (roll < share) return want as BatchWant;
    roll -= share;
  }
  return 'done';
}

/** Which of a run's jobs are of the batch kind: n % every = 11 (the plain 'chaos' queue, no key, no parents). */
export const batchedPlan = (n: number, every = 16) => n % every === 11;

export interface BatchHooks {
  /** Records one handler call: each job's id, lease token, attempt and the answer it will get. */
  recordBatch(
    batchId: string,
    rows: { jobId: string; leaseToken: string; attempt: number; answer: string }[],
  ): Promise<void>;
  die(): void;
  dieSoon(): void;
}

/**
 * The harness's batch kind. Each call is recorded first (batch id, and per job its lease token,
 * attempt and the answer the handler gives it); then, when one of its jobs asks, the process dies
 * before answering or as it answers; else each job gets its answer. A completed job's result names
 * its own n, the lease token and the batch that answered it: the checker matches each job's final
 * state with an answer recorded for that job.
 */
export function chaosBatchedJob(hooks: BatchHooks) {
  return defineBatchJob({
    kind: BATCHED_KIND,
    payload: z.object({ n: z.number().int(), want: z.enum(BATCH_WANTS) }),
    batch: { size: BATCH_SIZE, maxWaitMs: BATCH_WAIT_MS },
    timeoutMs: CHAOS_TIMEOUT_MS,
    maxAttempts: BATCHED_MAX_ATTEMPTS,
    backoff: { type: 'constant', delayMs: 50, jitter: 0.5 },
    handler: async (jobs) => {
      const batchId = randomUUID();
      const first = (j: { attempt: number }) => j.attempt === 1;
      const answerOf = (j: (typeof jobs)[number]): string => {
        const { want } = j.payload;
        if (want === 'dead' || want === 'cancel') return want;
        if (want === 'retry_once' && first(j)) return 'retry';
        if (want === 'left_once' && first(j)) return 'left_out';
        return 'done';
      };
      await hooks.recordBatch(
        batchId,
        jobs.map((j) => ({ jobId: j.id, leaseToken: j.leaseToken, attempt: j.attempt, answer: answerOf(j) })),
      );
      if (jobs.some((j) => j.payload.want === 'die_once' && first(j))) hooks.die();
      if (jobs.some((j) => j.payload.want === 'die_after' && first(j))) hooks.dieSoon();
      return jobs.flatMap((j) => {
        const answer = answerOf(j);
        if (answer === 'done') return [j.done({ n: j.payload.n, token: j.leaseToken, batch: batchId })];
        if (answer === 'retry') return [j.retry(new Error('chaos: retry once'))];
        if (answer === 'dead') return [j.dead(new Error('chaos: to the DLQ'), BATCH_DEAD_REASON)];
        if (answer === 'cancel') return [j.cancel('chaos: cancelled')];
        return []; // left out
      });
    },
  });
}

/** The hooks' records, written straight to Postgres (not through the fault proxy). */
export function poolBatchHooks(pool: pg.Pool, schema: string, die: () => void, dieSoon: () => void): BatchHooks {
  return {
    recordBatch: async (batchId, rows) => {
      await pool.query(
        `insert into "${schema}".chaos_batch_runs (batch_id, job_id, lease_token, attempt, answer, size, pid)
         select $1, r.job_id, r.lease_token, r.attempt, r.answer, $2, $3
         from unnest($4::bigint[], $5::uuid[], $6::int[], $7::text[]) as r(job_id, lease_token, attempt, answer)`,
        [
          batchId,
          rows.length,
          process.pid,
          rows.map((r) => r.jobId),
          rows.map((r) => r.leaseToken),
          rows.map((r) => r.attempt),
          rows.map((r) => r.answer),
        ],
      );
    },
    die,
    dieSoon,
  };
}

export async function createBatchTables(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`
    -- Every batch handler call: one row per job it was handed, with the answer it gave that job.
    create table "${schema}".chaos_batch_runs (
      batch_id uuid not null, job_id bigint not null, lease_token uuid not null, attempt int not null,
      answer text not null, size int not null, pid int not null);
    create index on "${schema}".chaos_batch_runs (job_id)`);
}

export interface BatchCheck {
  batches: number;
  jobs: number;
  /** Batch jobs whose final state is not the one their answers lead to (dead by kills aside). */
  mismatches: number;
  /** Completed jobs whose result is not an answer `done` recorded for that very job under that token. */
  foreign: number;
  /** Jobs completed twice (two transitions into completed in the audit). */
  completedTwice: number;
  /** A job handed to two calls under one lease, or a call with more than BATCH_SIZE jobs. */
  handedTwice: number;
  /** Dead by the kills (lease_expired, max_attempts): allowed, counted. */
  deadByKills: number;
}

/** Checks the batch kind's jobs of a finished run, from the recorded history. */
export async function checkBatches(pool: pg.Pool, schema: string): Promise<BatchCheck> {
  const s = `"${schema}"`;
  const one = async (text: string) => Number((await pool.query(text)).rows[0]?.n ?? 0);
  const mine = `select id, state, dead_reason, result, payload from ${s}.jobs where kind = '${BATCHED_KIND}'`;
  const killed = `state = 'dead' and dead_reason in ('lease_expired', 'max_attempts')`;
  const expected = `case payload->>'want' when 'dead' then 'dead' when 'cancel' then 'cancelled' else 'completed' end`;
  return {
    batches: await one(`select count(distinct batch_id) as n from ${s}.chaos_batch_runs`),
    jobs: await one(`select count(*) as n from (${mine}) j`),
    mismatches: await one(`
      select count(*) as n from (${mine}) j
      where not (${killed}) and (state <> ${expected}
        or (state = 'dead' and dead_reason <> '${BATCH_DEAD_REASON}'))`),
    foreign: await one(`
      select count(*) as n from (${mine}) j
      where j.state = 'completed' and (
        (j.result->>'n')::int <> (j.payload->>'n')::int
        or not exists (select 1 from ${s}.chaos_batch_runs r
          where r.job_id = j.id and r.answer = 'done' and r.lease_token::text = j.result->>'token'
            and r.batch_id::text = j.result->>'batch'))`),
    completedTwice: await one(`
      select count(*) as n from (
        select a.job_id from ${s}.chaos_audit a join (${mine}) j on j.id = a.job_id
        where a.old_state = 'running' and a.new_state in ('completed', 'deleted')
        group by a.job_id having count(*) > 1) x`),
    handedTwice: await one(`
      select (select count(*) from (select 1 from ${s}.chaos_batch_runs group by job_id, lease_token
          having count(distinct batch_id) > 1) x)
        + (select count(*) from ${s}.chaos_batch_runs where size > ${BATCH_SIZE}) as n`),
    deadByKills: await one(`select count(*) as n from (${mine}) j where ${killed}`),
  };
}

export const batchFailed = (b: BatchCheck) =>
  b.mismatches > 0 || b.foreign > 0 || b.completedTwice > 0 || b.handedTwice > 0;

/** The summary's batch line. */
export function batchLine(b: BatchCheck): string {
  const kept = batchFailed(b)
    ? `outcomes NOT kept per job (mismatches=${b.mismatches} foreign=${b.foreign} completed_twice=${b.completedTwice} handed_twice=${b.handedTwice})`
    : 'outcomes kept per job';
  return `batches: ${b.batches} batches, ${b.jobs} jobs, ${kept} (dead by kills ${b.deadByKills})`;
}
