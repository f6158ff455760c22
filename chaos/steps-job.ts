import { sql } from 'drizzle-orm';
import * as z from 'zod';
import { DiscardError, RetryError } from '../base/errors.js';
import { defineJob } from '../core/jobs.js';
import type { AnyPgDatabase } from '../db/connect.js';
import { queryRows } from '../db/execute.js';
import { executorOf } from '../db/executor-of.js';
import { CHAOS_TIMEOUT_MS } from './job.js';

/** The kind of the stepped jobs (a sixteenth of a run's jobs by default); half of them wait for a signal. */
export const STEPPED_KIND = 'chaos-stepped';

/** The five steps, in order; the two transactional ones each write one row to chaos_step_effects. */
export const STEPS = ['fetch', 'reserve', 'compute', 'charge', 'notify'] as const;
export const TRANSACTIONAL_STEPS: readonly string[] = ['reserve', 'charge'];
/** A short durable sleep between 'fetch' and 'reserve'. */
export const SLEEP_NAME = 'breather';
/** The wait for the job's signal (signalled jobs), between 'compute' and 'charge'. */
export const WAIT_NAME = 'approval';
/**
 * The stepped kind's attempts: skiplock's default, not the plain kind's 5. A rescue after its holder
 * died takes an attempt, a suspension gives back only its own claim's; a stepped job is claimed
 * several times and held longer (its lease pushed to 4 × its timeout at its first step), so under
 * this harness's kill rate (a worker process dies every second or two) 5 attempts left 0.6–2.4% of
 * them dead by lease_expired.
 */
export const STEPPED_MAX_ATTEMPTS = 25;
/** Generous: a wait that times out would mean its signal was lost (the job returns no payload). */
export const WAIT_TIMEOUT_MS = 30 * 60_000;

export const STEP_BEHAVIORS = ['ok', 'throw_once', 'die_in_step', 'die_finishing_step', 'die_after_step'] as const;
export type StepBehavior = (typeof STEP_BEHAVIORS)[number];

/** How often each behaviour is drawn for a stepped job (for one of its five steps); the rest are 'ok'. */
export const STEP_BEHAVIOR_SHARES: Record<Exclude<StepBehavior, 'ok'>, number> = {
  throw_once: 0.15,
  die_in_step: 0.03,
  die_finishing_step: 0.03,
  die_after_step: 0.03,
};

export function drawStepBehavior(random: () => number): { behavior: StepBehavior; at: number } {
  const at = Math.floor(random() * STEPS.length);
  let roll = random();
  for (const [behavior, share] of Object.entries(STEP_BEHAVIOR_SHARES)) {
    if (roll < share) return { behavior: behavior as StepBehavior, at };
    roll -= share;
  }
  return { behavior: 'ok', at };
}

/** The key a signalled job waits on: one per job of the run (the signals table is the run's schema's). */
export const signalKey = (n: number) => `chaos-signal:${n}`;

export interface StepHooks {
  /** Records one execution of a step's function; returns how many were recorded for it before. */
  recordStep(jobId: string, step: string, leaseToken: string): Promise<number>;
  /** Records the payload a run of the handler got from its wait, just before it returns. */
  recordSignal(jobId: string, leaseToken: string, payload: unknown): Promise<void>;
  die(): void;
  dieSoon(): void;
}

/**
 * The harness's stepped kind: five durable steps and a 30 ms sleep after the first, the second and fourth transactional (plain with
 * `transactional: false`, for neon-http, which has no interactive transactions; one row in
 * chaos_step_effects, its id the step's result), the others plain; signalled jobs wait for their
 * signal between the third and fourth step and return its payload. Every execution of a step's
 * function — the plain ones' and the transactional ones' — is recorded first, before anything else
 * (job, step, lease token, process, the database's snapshot); then, on
 * the drawn step, the job throws on the step's first execution, kills its process inside it (a
 * transactional step: after its row was written, before the commit), kills it as the step's function
 * returns (racing the step's record), or kills it right after the step's completion was recorded.
 */
export function chaosSteppedJob(schema: string, hooks: StepHooks, options: { transactional?: boolean } = {}) {
  const effects = sql`${sql.identifier(schema)}.chaos_step_effects`;
  const transactionalSteps = options.transactional === false ? [] : TRANSACTIONAL_STEPS;
  return defineJob({
    kind: STEPPED_KIND,
    payload: z.object({
      n: z.number().int(),
      behavior: z.enum(STEP_BEHAVIORS),
      at: z.number().int().min(0).max(4),
      signal: z.boolean(),
    }),
    timeoutMs: CHAOS_TIMEOUT_MS,
    maxAttempts: STEPPED_MAX_ATTEMPTS,
    backoff: { type: 'constant', delayMs: 50, jitter: 0.5 },
    handler: async ({ n, behavior, at, signal }, ctx) => {
      // Inside the drawn step's function, on its first execution only.
      const misbehave = (index: number, first: boolean) => {
        if (index !== at || !first) return;
        if (behavior === 'throw_once') throw new RetryError(`step ${STEPS[index]}: first execution fails`);
        if (behavior === 'die_in_step') hooks.die();
        if (behavior === 'die_finishing_step') hooks.dieSoon();
      };
      const plain = (index: number) => async () => {
        const name = STEPS[index] as string;
        const before = await hooks.recordStep(ctx.id, name, ctx.leaseToken);
        misbehave(index, before === 0);
        return `${name}:${n}`;
      };
      const transactional = (index: number) => async (tx: AnyPgDatabase) => {
        const name = STEPS[index] as string;
        const before = await hooks.recordStep(ctx.id, name, ctx.leaseToken);
        const [row] = await queryRows<{ id: string }>(
          executorOf(tx),
          sql`insert into ${effects} (job_id, step, lease_token, pid)
            values (${ctx.id}, ${name}, ${ctx.leaseToken}, ${process.pid}) returning id::text as id`,
          schema,
        );
        misbehave(index, before === 0);
        return String(row?.id);
      };
      // A step run (or its stored result read); after it returned (its completion recorded), the
      // first attempt may die there.
      const results: string[] = [];
      const step = async (index: number) => {
        const name = STEPS[index] as string;
        results.push(
          transactionalSteps.includes(name)
            ? await ctx.step(name, { transaction: true }, transactional(index))
            : await ctx.step(name, plain(index)),
        );
        if (behavior === 'die_after_step' && index === at && ctx.attempt === 1) hooks.die();
      };
      await step(0);
      // A durable sleep: the job leaves the invocation and comes back 30 ms later (any invocation).
      await ctx.sleep(SLEEP_NAME, 30);
      await step(1);
      await step(2);
      let payload: unknown = null;
      if (signal) {
        const got = await ctx.waitForSignal(WAIT_NAME, { key: signalKey(n), timeoutMs: WAIT_TIMEOUT_MS });
        payload = got.timedOut ? null : got.payload;
      }
      await step(3);
      await step(4);
      // A plain step's stored result must be what its function returned, run after run.
      for (const [index, name] of STEPS.entries()) {
        if (!transactionalSteps.includes(name) && results[index] !== `${name}:${n}`) {
          throw new DiscardError(`step ${name} returned ${JSON.stringify(results[index])}`, { reason: 'step_result' });
        }
      }
      if (signal) await hooks.recordSignal(ctx.id, ctx.leaseToken, payload);
      return { n, effects: [results[1], results[3]], signal: payload };
    },
  });
}

/**
 * Which of a run's jobs are stepped (one in `every`, a power of two ≥ 4, 16 by default; all in the
 * plain 'chaos' queue, as n % 4 = 3), signalled (half of those) and signalled early (half again).
 */
export function steppedPlan(n: number, every = 16): { stepped: boolean; signal: boolean; early: boolean } {
  return { stepped: n % every === 3, signal: n % (2 * every) === 3, early: n % (4 * every) === 3 };
}

/** The hooks' records, written straight to Postgres (not through the fault proxy). */
export function poolStepHooks(
  pool: { query(text: string, values: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> },
  schema: string,
  die: () => void,
  dieSoon: () => void,
): StepHooks {
  const s = `"${schema}"`;
  return {
    recordStep: async (jobId, step, leaseToken) => {
      const { rows } = await pool.query(
        `insert into ${s}.chaos_step_runs (job_id, step, lease_token, pid) values ($1, $2, $3, $4)
         returning (select count(*) from ${s}.chaos_step_runs r where r.job_id = $1 and r.step = $2)::int as before`,
        [jobId, step, leaseToken, process.pid],
      );
      return Number(rows[0]?.before ?? 0);
    },
    recordSignal: async (jobId, leaseToken, payload) => {
      await pool.query(`insert into ${s}.chaos_signal_results (job_id, lease_token, payload) values ($1, $2, $3)`, [
        jobId,
        leaseToken,
        JSON.stringify(payload),
      ]);
    },
    die,
    dieSoon,
  };
}
