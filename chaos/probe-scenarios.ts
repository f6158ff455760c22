import type pg from 'pg';
import * as z from 'zod';
import { SkiplockError } from '../base/errors.js';
import { createEnqueuer } from '../core/enqueue.js';
import { defineJob } from '../core/jobs.js';
import { silentLogger } from '../core/logger.js';
import { replay } from '../core/replay.js';
import { createWorker, type InvocationSummary } from '../core/worker/index.js';
import type { SkiplockDb } from '../db/connect.js';
import type { FaultMode, Faults } from '../testing/faults.js';

/** What one scenario may use: the driver under test through its stand-in, and a direct pool to look. */
export interface ProbeContext {
  db: SkiplockDb;
  faults: Faults;
  admin: pg.Pool;
  schema: string;
  /** Arms `mode` on the statements `match` names, with the probe's delays. */
  arm(mode: FaultMode, match: string | RegExp): void;
  /**
   * Waits until the stand-in holds nothing half-open: a statement frozen there may still hold its
   * row's lock, and what it did is not known before it lets go.
   */
  quiet(): Promise<void>;
}

/** What a scenario saw: the caller's error code (`ok` without one), and whether its guarantee held. */
export interface ProbeOutcome {
  answer: string;
  held: boolean;
  /** What did not hold, in words. */
  why?: string;
}

export interface Scenario {
  /** The operation, as the probe's table names it. */
  name: string;
  /** The statement the fault is armed on (the stand-in matches its SQL text). */
  match: string | RegExp;
  /** Only on drivers with a `batch` (neon-http). */
  batchOnly?: boolean;
  run(ctx: ProbeContext, mode: FaultMode): Promise<ProbeOutcome>;
}

/** A window longer than the epoch so far: one job per key for as long as its row is kept. */
const FOREVER_MS = 1_000 * 365 * 24 * 3_600_000;
const payload = z.object({ n: z.number() });
const executions: string[] = [];
/**
 * Longer than the probe's queryTimeoutMs: a statement whose answer never comes fails the attempt
 * (and it retries at once) before the attempt's own timeout abandons it (and it retries only after
 * its lease).
 */
const TIMEOUT_MS = 5_000;
const note = defineJob({ kind: 'note', payload, timeoutMs: 1_000 });
/** Called once by the next task that runs (then cleared): arms a fault after the claim that took it. */
let onRun: (() => void) | undefined;
const task = defineJob({
  kind: 'task',
  payload,
  timeoutMs: TIMEOUT_MS,
  backoff: { type: 'constant', delayMs: 0 },
  handler: (p) => {
    executions.push(`task:${p.n}`);
    onRun?.();
    onRun = undefined;
  },
});
const stepped = defineJob({
  kind: 'stepped',
  payload,
  timeoutMs: TIMEOUT_MS,
  backoff: { type: 'constant', delayMs: 0 },
  handler: async (p, ctx) => {
    await ctx.step('a', () => void executions.push(`a:${p.n}`));
    await ctx.step('b', () => void executions.push(`b:${p.n}`));
  },
});
const sleeper = defineJob({
  kind: 'sleeper',
  payload,
  timeoutMs: TIMEOUT_MS,
  backoff: { type: 'constant', delayMs: 0 },
  handler: async (p, ctx) => {
    executions.push(`before:${p.n}`);
    await ctx.sleep('nap', 3_600_000);
    executions.push(`after:${p.n}`);
  },
});
const waiter = defineJob({
  kind: 'waiter',
  payload,
  timeoutMs: TIMEOUT_MS,
  handler: async (p, ctx) => {
    const got = await ctx.waitForSignal<{ v: number }>('go', { key: `go:${p.n}`, timeoutMs: 3_600_000 });
    executions.push(got.timedOut ? 'timed-out' : `signal:${got.payload.v}`);
  },
});
const poison = defineJob({
  kind: 'poison',
  payload,
  timeoutMs: TIMEOUT_MS,
  maxAttempts: 1,
  handler: () => {
    throw new Error('always fails');
  },
});
const KINDS = [task, stepped, sleeper, waiter, poison];

const codeOf = (err: unknown) => (err instanceof SkiplockError ? err.code : 'unclassified');
/** Runs `fn`; the code of what it threw, or `ok`. */
async function answerOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (err) {
    return codeOf(err);
  }
}
async function one(admin: pg.Pool, text: string, values: unknown[] = []): Promise<number> {
  return Number((await admin.query(text, values)).rows[0]?.n ?? 0);
}
function verdict(answer: string, problems: (string | false)[]): ProbeOutcome {
  const why = problems.filter((p): p is string => typeof p === 'string');
  return why.length === 0 ? { answer, held: true } : { answer, held: false, why: why.join('; ') };
}
/** An answer that says nothing was written must be true: a job (or row) that exists contradicts it. */
const saidUnreachable = (answer: string, wrote: boolean) =>
  answer === 'database_unreachable' && wrote && 'said the database was unreachable, but it wrote';

/** Runs worker invocations (no fault armed after the first) until nothing is claimed, at most `max`. */
async function work(ctx: ProbeContext, max = 6): Promise<InvocationSummary[]> {
  const worker = createWorker({ db: ctx.db, schema: ctx.schema, jobs: KINDS, logger: silentLogger });
  const summaries: InvocationSummary[] = [];
  for (let i = 0; i < max; i++) {
    const summary = await worker.runInvocation({ remainingMs: 20_000 });
    summaries.push(summary);
    if (summary.claimed === 0 && summary.stoppedBecause !== 'error') break;
  }
  return summaries;
}

/** What the first invocation made of a statement an attempt sent (a step's record, a sleep). */
function attemptAnswer(summary: InvocationSummary | undefined): string {
  if (!summary) return 'none';
  if (summary.errorCode) return summary.errorCode;
  if (summary.leaseLost > 0) return 'attempt: lease lost';
  if (summary.retried > 0) return 'attempt retried';
  return summary.suspended ? 'suspended' : 'ok';
}

let serial = 0;
/** A fresh number per scenario run: keys, payloads and correlation ids never meet another run's. */
const next = () => ++serial;

export const SCENARIOS: Scenario[] = [
  {
    name: 'enqueue, keyed',
    match: 'insert into',
    async run(ctx) {
      const n = next();
      const q = createEnqueuer({ schema: ctx.schema });
      const send = () =>
        q.enqueue(ctx.db, note, { n }, { dedupe: { key: `k${n}`, mode: 'window', windowMs: FOREVER_MS } });
      const answer = await answerOf(send);
      const wrote =
        (await one(ctx.admin, `select count(*) as n from "${ctx.schema}".jobs where dedupe_key = $1`, [`k${n}`])) > 0;
      if (answer !== 'ok') await send();
      const jobs = await one(ctx.admin, `select count(*) as n from "${ctx.schema}".jobs where dedupe_key = $1`, [
        `k${n}`,
      ]);
      return verdict(answer, [saidUnreachable(answer, wrote), jobs !== 1 && `${jobs} jobs after the retry`]);
    },
  },
  {
    name: 'enqueue many, keyed',
    match: 'insert into',
    async run(ctx) {
      const n = next();
      const q = createEnqueuer({ schema: ctx.schema });
      const requests = [0, 1, 2].map((i) =>
        note.with({ n }, { dedupe: { key: `m${n}:${i}`, mode: 'window', windowMs: FOREVER_MS } }),
      );
      const count = () =>
        one(ctx.admin, `select count(*) as n from "${ctx.schema}".jobs where dedupe_key like $1`, [`m${n}:%`]);
      const answer = await answerOf(() => q.enqueueMany(ctx.db, requests));
      const written = await count();
      if (answer !== 'ok') await q.enqueueMany(ctx.db, requests);
      const jobs = await count();
      return verdict(answer, [
        saidUnreachable(answer, written > 0),
        written !== 0 && written !== 3 && `${written} of 3 written (not all or none)`,
        jobs !== 3 && `${jobs} jobs after the retry`,
      ]);
    },
  },
  {
    name: 'enqueue a flow',
    match: 'insert into',
    async run(ctx) {
      const n = next();
      const q = createEnqueuer({ schema: ctx.schema });
      const cid = `flow-${n}`;
      const answer = await answerOf(() =>
        q.enqueueFlow(ctx.db, {
          a: note.with({ n }, { correlationId: cid }),
          b: note.with({ n }, { correlationId: cid, after: ['a'] }),
        }),
      );
      const jobs = await one(ctx.admin, `select count(*) as n from "${ctx.schema}".jobs where correlation_id = $1`, [
        cid,
      ]);
      return verdict(answer, [
        saidUnreachable(answer, jobs > 0),
        jobs !== 0 && jobs !== 2 && `${jobs} of 2 written (not all or none)`,
        answer === 'ok' && jobs !== 2 && 'answered ok without the jobs',
      ]);
    },
  },
  {
    name: 'enqueue in a neon-http batch, keyed',
    match: 'insert into',
    batchOnly: true,
    async run(ctx) {
      const n = next();
      const q = createEnqueuer({ schema: ctx.schema });
      const batching = ctx.db.db as unknown as { batch(queries: unknown[]): Promise<unknown[]> };
      const send = () => {
        const prepared = q.prepareEnqueue([
          note.with({ n }, { dedupe: { key: `b${n}`, mode: 'window', windowMs: FOREVER_MS } }),
        ]);
        return batching.batch(prepared.statements.map((s) => ctx.db.db.execute(s)));
      };
      // The caller's own batch: Drizzle's error, not skiplock's (any error means "maybe").
      const answer = await answerOf(send).then((a) => (a === 'unclassified' ? 'error' : a));
      if (answer !== 'ok') await send();
      const jobs = await one(ctx.admin, `select count(*) as n from "${ctx.schema}".jobs where dedupe_key = $1`, [
        `b${n}`,
      ]);
      return verdict(answer, [jobs !== 1 && `${jobs} jobs after the retry`]);
    },
  },
  {
    name: 'claim',
    match: 'claimed as (',
    async run(ctx) {
      const n = next();
      executions.length = 0;
      await createEnqueuer({ schema: ctx.schema }).enqueueMany(
        ctx.db,
        [0, 1, 2].map((i) => task.with({ n: n * 10 + i }, { correlationId: `claim-${n}` })),
      );
      const [first, ...rest] = await work(ctx);
      const rows = (
        await ctx.admin.query(`select state, attempt from "${ctx.schema}".jobs where correlation_id = $1`, [
          `claim-${n}`,
        ])
      ).rows as { state: string; attempt: number }[];
      const completed = [first, ...rest].reduce((sum, s) => sum + (s?.completed ?? 0), 0);
      return verdict(first?.errorCode ?? 'ok', [
        rows.some((r) => r.state !== 'completed') && 'a job did not complete',
        rows.some((r) => r.attempt !== 1) && 'an attempt was counted for a claim whose jobs never ran',
        executions.length !== 3 && `${executions.length} executions of 3 jobs`,
        completed !== 3 && `the summaries counted ${completed} completions of 3`,
      ]);
    },
  },
  {
    name: 'settle',
    match: 'settle_input',
    async run(ctx, mode) {
      const n = next();
      executions.length = 0;
      // Every claim carries a settle (empty in an invocation's first claim: one text), so the fault is
      // armed once a job ran, on the statement that then carries its outcome.
      ctx.faults.clear();
      onRun = () => ctx.arm(mode, 'settle_input');
      await createEnqueuer({ schema: ctx.schema }).enqueueMany(
        ctx.db,
        [0, 1, 2].map((i) => task.with({ n: n * 10 + i }, { correlationId: `settle-${n}` })),
      );
      const summaries = await work(ctx);
      onRun = undefined;
      const rows = (
        await ctx.admin.query(`select state from "${ctx.schema}".jobs where correlation_id = $1`, [`settle-${n}`])
      ).rows as { state: string }[];
      const completed = summaries.reduce((sum, s) => sum + s.completed, 0);
      const lost = summaries.reduce((sum, s) => sum + s.leaseLost, 0);
      return verdict(summaries[0]?.errorCode ?? 'ok', [
        rows.some((r) => r.state !== 'completed') && 'a job did not complete',
        executions.length !== 3 && `${executions.length} executions of 3 jobs`,
        completed !== 3 && `the summaries counted ${completed} completions of 3`,
        lost !== 0 && `${lost} counted as lost leases`,
      ]);
    },
  },
  {
    name: "a durable step's record",
    match: 'for share',
    async run(ctx) {
      const n = next();
      executions.length = 0;
      const { id } = await createEnqueuer({ schema: ctx.schema }).enqueue(ctx.db, stepped, { n });
      const [first] = await work(ctx, 1);
      await ctx.quiet();
      // Whether the record the fault hit committed: then the step must never run again (one that
      // never reached Postgres runs again, as a step in flight may).
      const recorded =
        (await one(
          ctx.admin,
          `select count(*) as n from "${ctx.schema}".job_steps where job_id = $1 and name = 'a' and state = 'completed'`,
          [id],
        )) === 1;
      await work(ctx);
      const state = (await ctx.admin.query(`select state from "${ctx.schema}".jobs where id = $1`, [id])).rows[0]
        ?.state;
      const expected = recorded ? [`a:${n},b:${n}`] : [`a:${n},b:${n}`, `a:${n},a:${n},b:${n}`];
      return verdict(attemptAnswer(first), [
        state !== 'completed' && `the job is ${state}`,
        !expected.includes(executions.join(',')) &&
          `steps ran as ${executions.join(',')}${recorded ? " though a's record had committed" : ''}`,
      ]);
    },
  },
  {
    name: 'a sleep',
    // suspendJob's update (a wait's and a release's take the attempt back too, without greatest()).
    match: /attempt = j\.attempt - 1,\s+run_at = greatest\(/,
    async run(ctx) {
      const n = next();
      executions.length = 0;
      const { id } = await createEnqueuer({ schema: ctx.schema }).enqueue(ctx.db, sleeper, { n });
      const asleep = async () =>
        (
          await ctx.admin.query(
            `select state = 'queued' and run_at > now() + interval '30 minutes' as asleep from "${ctx.schema}".jobs where id = $1`,
            [id],
          )
        ).rows[0]?.asleep === true;
      const [first] = await work(ctx, 1);
      await ctx.quiet();
      // A sleep that reached Postgres is kept; one that never did is taken again by the retry, after
      // the handler's code before it ran once more (code outside a step may run again).
      const slept = await asleep();
      await work(ctx);
      const expected = slept ? [`before:${n}`] : [`before:${n},before:${n}`];
      return verdict(attemptAnswer(first), [
        !(await asleep()) && 'the job is not asleep',
        !expected.includes(executions.join(',')) && `ran as ${executions.join(',')}`,
      ]);
    },
  },
  {
    name: 'a signal, with its id',
    match: 'insert into',
    async run(ctx, mode) {
      const n = next();
      executions.length = 0;
      const q = createEnqueuer({ schema: ctx.schema });
      ctx.faults.clear(); // armed below, on the signal's own insert
      const { id } = await q.enqueue(ctx.db, waiter, { n });
      await work(ctx); // the job reaches its wait
      ctx.arm(mode, 'insert into');
      const send = () => q.signal(ctx.db, `go:${n}`, { v: n }, { id: `evt-${n}` });
      const answer = await answerOf(send);
      const wrote =
        (await one(ctx.admin, `select count(*) as n from "${ctx.schema}".signals where key = $1`, [`go:${n}`])) > 0;
      if (answer !== 'ok') await send();
      const signals = await one(ctx.admin, `select count(*) as n from "${ctx.schema}".signals where key = $1`, [
        `go:${n}`,
      ]);
      await work(ctx);
      const state = (await ctx.admin.query(`select state from "${ctx.schema}".jobs where id = $1`, [id])).rows[0]
        ?.state;
      return verdict(answer, [
        saidUnreachable(answer, wrote),
        signals !== 1 && `${signals} signals stored`,
        state !== 'completed' && `the job is ${state}`,
        executions.join(',') !== `signal:${n}` && `the job got ${executions.join(',') || 'nothing'}`,
      ]);
    },
  },
  {
    name: 'a replay',
    match: 'replay',
    async run(ctx, mode) {
      const n = next();
      ctx.faults.clear(); // armed below, on the replay's statement
      const { id } = await createEnqueuer({ schema: ctx.schema }).enqueue(ctx.db, poison, { n });
      await work(ctx); // it dies
      ctx.arm(mode, 'replay');
      const options = { schema: ctx.schema, ids: [id], by: 'probe' };
      const answer = await answerOf(() => replay(ctx.db, options));
      if (answer !== 'ok') await replay(ctx.db, options);
      const row = (await ctx.admin.query(`select state, replay_count from "${ctx.schema}".jobs where id = $1`, [id]))
        .rows[0];
      return verdict(answer, [
        row?.replay_count !== 1 && `replayed ${row?.replay_count} times`,
        row?.state !== 'queued' && `the job is ${row?.state}`,
      ]);
    },
  },
];
