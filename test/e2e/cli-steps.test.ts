import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { EXIT } from '../../cli/run.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob, type JobDefinition } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { ManualClock } from '../../testing/clock.js';
import { cliOn } from '../helpers/cli.js';

// The CLI on jobs with durable steps, against a real database: `jobs show` prints their steps,
// `dlq replay --from-step / --restart` forgets what the docs say (checked in the rows, then by
// running the job again), and `stats` counts the jobs asleep and waiting for a signal.
const schema = `cli_steps_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;
let db: ReturnType<typeof connect>;

const cli = cliOn(schema);

const payload = z.object({ n: z.number().default(0) });
const instant = { type: 'constant', delayMs: 0 } as const;
// biome-ignore lint/suspicious/noExplicitAny: kinds of any payload.
const enqueue = async (kind: JobDefinition<any, any>, p: Record<string, unknown> = {}) =>
  (await createEnqueuer({ schema }).enqueueMany(db, [kind.with(p)]))[0]?.id as string;
// biome-ignore lint/suspicious/noExplicitAny: kinds of any payload.
const run = (jobs: JobDefinition<any, any>[], clock = new ManualClock()) =>
  createWorker({ db, schema, jobs, logger: silentLogger, clock }).runInvocation({ remainingMs: 60_000 });
const jobRow = async (id: string) =>
  (
    await admin.query(
      `select state, dead_reason, attempt, replayed_by, run_at > now() + interval '71 hours' as asleep from "${schema}".jobs where id = $1`,
      [id],
    )
  ).rows[0];
const stepRows = async (id: string) =>
  (
    await admin.query(
      `select name, state, attempts, result from "${schema}".job_steps where job_id = $1 order by position`,
      [id],
    )
  ).rows;

/** A printed table's rows as objects, each cell cut at its column's place (the dashes line gives them). */
function parseTable(text: string): Record<string, string>[] {
  const lines = text.split('\n');
  const dashAt = lines.findIndex((l) => /^-+( +-+)*$/.test(l));
  const header = lines[dashAt - 1] as string;
  const spans = [...(lines[dashAt] as string).matchAll(/-+/g)].map((m) => [m.index, m.index + m[0].length] as const);
  const cut = (line: string) => spans.map(([from, to]) => line.slice(from, to).trim());
  const names = cut(header);
  const rows: Record<string, string>[] = [];
  for (const line of lines.slice(dashAt + 1)) {
    if (line.trim() === '') break;
    rows.push(Object.fromEntries(cut(line).map((cell, i) => [names[i], cell])));
  }
  return rows;
}

/** collect → build → charge; charge fails while `failing` is set (one attempt); counts each step's calls. */
function pipeline(name: string, clock?: ManualClock) {
  const runs = { collect: 0, build: 0, charge: 0 };
  const state = { failing: true };
  const kind = defineJob({
    kind: name,
    payload,
    handler: async (_p, ctx) => {
      const orders = await ctx.step('collect', () => {
        runs.collect++;
        clock?.advance(1_234);
        return 42;
      });
      const file = await ctx.step('build', () => {
        runs.build++;
        return `report-${orders}.csv`;
      });
      await ctx.step(
        'charge',
        () => {
          runs.charge++;
          if (state.failing) throw new Error('card declined');
          return 'charged';
        },
        { maxAttempts: 2, backoff: instant },
      );
      return file;
    },
  });
  return { kind, runs, state };
}

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  db = connect({ connectionString: inject('databaseUrl') });
  await migrate(db, { schema });
});
afterAll(async () => {
  await db?.close();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock CLI on jobs with durable steps', () => {
  it("jobs show prints a dead job's steps (state, attempts, duration, result size, last error) and names the step in its errors", async () => {
    const clock = new ManualClock();
    const { kind } = pipeline('pipeline', clock);
    const id = await enqueue(kind);
    expect(await run([kind], clock)).toMatchObject({ dead: 1, retried: 1 });
    const shown = await cli('jobs', 'show', id);
    expect(shown.code).toBe(EXIT.ok);
    expect(shown.out).toMatch(new RegExp(`^job ${id}  pipeline on default  dead \\(step_failed\\)$`, 'm'));
    const lines = shown.out.split('\n');
    const at = lines.indexOf('steps (3):');
    expect(at).toBeGreaterThan(0);
    expect(lines.slice(at, at + 7)).toEqual([
      'steps (3):',
      '  1. collect  completed  1 attempt  1234 ms  result 2 B',
      '  2. build  completed  1 attempt  0 ms  result 15 B',
      '  3. charge  failed  2 attempts  last error: card declined',
      'errors (2):',
      '  attempt 1 (step charge): Error: card declined',
      '  attempt 1: discard: step "charge" failed 2 times (maxAttempts 2): card declined',
    ]);
    const json = JSON.parse((await cli('jobs', 'show', id, '--json')).out) as {
      steps: { name: string; type: string; state: string; attempts: number; durationMs: number | null }[];
    };
    expect(json.steps.map((s) => [s.name, s.type, s.state, s.attempts, s.durationMs])).toEqual([
      ['collect', 'run', 'completed', 1, 1_234],
      ['build', 'run', 'completed', 1, 0],
      ['charge', 'run', 'failed', 2, null],
    ]);
    // A job that reached no step prints no steps section.
    const plain = defineJob({ kind: 'no-steps', payload, handler: () => {} });
    const plainId = await enqueue(plain);
    expect((await cli('jobs', 'show', plainId)).out).not.toMatch(/^steps/m);
  });

  it('jobs show says a sleeping job sleeps until its wake-up and a waiting one waits for its signal until the timeout, with no lease holder; stats counts them', async () => {
    const sleeper = defineJob({
      kind: 'sleeper',
      queue: 'drip',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('welcome', () => 'sent');
        await ctx.sleep('settle-in', 3 * 86_400_000);
      },
    });
    const waiter = defineJob({
      kind: 'waiter',
      queue: 'drip',
      payload,
      handler: async (p, ctx) => {
        await ctx.waitForSignal('activated', { key: `activate:${p.n}`, timeoutMs: 7 * 86_400_000 });
      },
    });
    const sleeping = [await enqueue(sleeper, { n: 1 }), await enqueue(sleeper, { n: 2 })];
    const waiting = await enqueue(waiter, { n: 3 });
    expect(await run([sleeper, waiter])).toMatchObject({ suspended: 3 });
    expect(await jobRow(sleeping[0] as string)).toMatchObject({ state: 'queued', attempt: 0, asleep: true });

    // Asleep: queued until its wake-up, held by no one (its last claim's holder is history).
    const wakeAt = (
      (await admin.query(`select run_at from "${schema}".jobs where id = $1`, [sleeping[0]])).rows[0].run_at as Date
    ).toISOString();
    const nap = (await cli('jobs', 'show', sleeping[0] as string)).out.split('\n');
    expect(nap[0]).toBe(`job ${sleeping[0]}  sleeper on drip  queued: sleeping until ${wakeAt} (step settle-in)`);
    expect(nap.find((l) => l.startsWith('lease:'))).toMatch(/^lease: none \(last held by [0-9a-f-]{36}\)$/);
    const napAt = nap.indexOf('steps (2):');
    expect(nap.slice(napAt, napAt + 4)).toEqual([
      'steps (2):',
      '  1. welcome  completed  1 attempt  0 ms  result 6 B',
      `  2. settle-in  (sleep)  sleeping until ${wakeAt}  1 attempt`,
      'errors (0):',
    ]);
    const napJson = JSON.parse((await cli('jobs', 'show', sleeping[0] as string, '--json')).out) as {
      steps: { name: string; state: string; wakeAt: string | null; finishedAt: string | null }[];
    };
    expect(napJson.steps[1]).toMatchObject({ name: 'settle-in', state: 'sleeping', wakeAt, finishedAt: null });
    const { rows } = await admin.query(`select timeout_at from "${schema}".job_steps where job_id = $1`, [waiting]);
    const timeoutAt = (rows[0].timeout_at as Date).toISOString();
    const wait = (await cli('jobs', 'show', waiting)).out.split('\n');
    expect(wait[0]).toBe(
      `job ${waiting}  waiter on drip  queued: waiting for signal "activate:3" until ${timeoutAt} (step activated)`,
    );
    expect(wait.find((l) => l.startsWith('lease:'))).toMatch(/^lease: none \(last held by [0-9a-f-]{36}\)$/);
    const waitAt = wait.indexOf('steps (1):');
    expect(wait.slice(waitAt, waitAt + 2)).toEqual([
      'steps (1):',
      `  1. activated  (signal)  waiting for signal "activate:3" until ${timeoutAt}  1 attempt`,
    ]);

    const human = await cli('stats');
    expect(human.code).toBe(EXIT.ok);
    const byKind = Object.fromEntries(parseTable(human.out).map((r) => [r.kind, r]));
    // Asleep or waiting, the jobs are also among the scheduled (queued, due later).
    expect(byKind.sleeper).toMatchObject({
      queue: 'drip',
      ready: '0',
      scheduled: '2',
      sleeping: '2',
      'for signal': '0',
    });
    expect(byKind.waiter).toMatchObject({
      queue: 'drip',
      ready: '0',
      scheduled: '1',
      sleeping: '0',
      'for signal': '1',
    });
    const { depth } = JSON.parse((await cli('stats', '--json')).out) as {
      depth: { queue: string; kind: string; sleeping: number; waitingForSignal: number }[];
    };
    expect(depth.filter((r) => r.queue === 'drip').map((r) => [r.kind, r.sleeping, r.waitingForSignal])).toEqual([
      ['sleeper', 2, 0],
      ['waiter', 0, 1],
    ]);
    // Woken by its signal and done, the waiter is no longer counted.
    expect((await createEnqueuer({ schema }).signal(db, 'activate:3', {})).woken).toBe(1);
    expect(await run([waiter])).toMatchObject({ completed: 1 });
    const after = Object.fromEntries(parseTable((await cli('stats')).out).map((r) => [r.kind, r]));
    expect(after.waiter).toMatchObject({ sleeping: '0', 'for signal': '0' });
    expect(after.sleeper).toMatchObject({ sleeping: '2' });
    const done = (await cli('jobs', 'show', waiting)).out.split('\n');
    expect(done[0]).toBe(`job ${waiting}  waiter on drip  completed`);
    expect(done).toContain('  1. activated  (signal)  completed  1 attempt  result 15 B');
  });

  it('jobs show names the holder of a running job and when its lease ends, and none once it is done', async () => {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const held = defineJob({
      kind: 'held',
      payload,
      handler: async () => {
        started();
        await gate;
      },
    });
    const id = await enqueue(held);
    const invocation = createWorker({ db, schema, jobs: [held], logger: silentLogger }).runInvocation({
      remainingMs: 60_000,
      invocationId: 'inv-held-1',
    });
    await running;
    const { rows } = await admin.query(`select lease_token, lease_expires_at from "${schema}".jobs where id = $1`, [
      id,
    ]);
    const lease = (lines: string[]) => lines.find((l) => l.startsWith('lease:'));
    expect(lease((await cli('jobs', 'show', id)).out.split('\n'))).toBe(
      `lease: ${rows[0].lease_token} held by inv-held-1 until ${(rows[0].lease_expires_at as Date).toISOString()}`,
    );
    release();
    expect(await invocation).toMatchObject({ completed: 1 });
    expect(lease((await cli('jobs', 'show', id)).out.split('\n'))).toBe('lease: none (last held by inv-held-1)');
  });

  it('dlq replay --from-step forgets that step and the later ones, --restart all of them; by default the failed step gets its attempts back', async () => {
    const cases = [
      {
        flags: ['--from-step', 'build'],
        kept: [{ name: 'collect', state: 'completed', attempts: 1, result: 42 }],
        runs: { collect: 1, build: 2, charge: 3 },
      },
      { flags: ['--restart'], kept: [], runs: { collect: 2, build: 2, charge: 3 } },
      {
        flags: [],
        kept: [
          { name: 'collect', state: 'completed', attempts: 1, result: 42 },
          { name: 'build', state: 'completed', attempts: 1, result: 'report-42.csv' },
          { name: 'charge', state: 'failed', attempts: 0, result: null },
        ],
        runs: { collect: 1, build: 1, charge: 3 },
      },
      {
        // A step the job never reached: every step is kept.
        flags: ['--from-step', 'no-such-step'],
        kept: [
          { name: 'collect', state: 'completed', attempts: 1, result: 42 },
          { name: 'build', state: 'completed', attempts: 1, result: 'report-42.csv' },
          { name: 'charge', state: 'failed', attempts: 0, result: null },
        ],
        runs: { collect: 1, build: 1, charge: 3 },
      },
    ];
    for (const { flags, kept, runs: expected } of cases) {
      const { kind, runs, state } = pipeline('replayed');
      const id = await enqueue(kind);
      expect(await run([kind])).toMatchObject({ dead: 1 });
      expect(await jobRow(id)).toMatchObject({ state: 'dead', dead_reason: 'step_failed' });
      const replayed = await cli('dlq', 'replay', id, ...flags);
      expect({ flags, replayed }).toMatchObject({
        flags,
        replayed: { code: EXIT.ok, out: `replayed 1 job(s): ${id}` },
      });
      expect(await jobRow(id)).toMatchObject({
        state: 'queued',
        dead_reason: null,
        attempt: 0,
        replayed_by: 'cli:tester',
      });
      expect({ flags, steps: await stepRows(id) }).toEqual({ flags, steps: kept });
      state.failing = false;
      expect(await run([kind])).toMatchObject({ completed: 1 });
      expect({ flags, runs }).toEqual({ flags, runs: expected });
      expect((await stepRows(id)).map((s) => [s.name, s.state])).toEqual([
        ['collect', 'completed'],
        ['build', 'completed'],
        ['charge', 'completed'],
      ]);
    }
  });

  it('dlq replay --keep-attempts leaves the failed step its spent attempts; --restart with --from-step is refused, nothing changed', async () => {
    const { kind } = pipeline('kept');
    const id = await enqueue(kind);
    expect(await run([kind])).toMatchObject({ dead: 1 });
    const both = await cli('dlq', 'replay', id, '--restart', '--from-step', 'build');
    expect(both.code).toBe(EXIT.usage);
    expect(both.err).toMatch(/give restart or fromStep, not both/);
    expect(await jobRow(id)).toMatchObject({ state: 'dead', dead_reason: 'step_failed' });
    expect((await stepRows(id)).map((s) => [s.name, s.attempts])).toEqual([
      ['collect', 1],
      ['build', 1],
      ['charge', 2],
    ]);
    expect((await cli('dlq', 'replay', id, '--keep-attempts')).code).toBe(EXIT.ok);
    expect(await jobRow(id)).toMatchObject({ state: 'queued', attempt: 1 });
    expect((await stepRows(id)).map((s) => [s.name, s.state, s.attempts])).toEqual([
      ['collect', 'completed', 1],
      ['build', 'completed', 1],
      ['charge', 'failed', 2],
    ]);
  });

  it('dlq replay --from-step after a code change: the job resumes under the new code from that step (docs: changing the code of running jobs)', async () => {
    let version = 1;
    const ran: string[] = [];
    const kind = defineJob({
      kind: 'redeployed',
      payload,
      handler: async (_p, ctx) => {
        await ctx.step('collect', () => void ran.push('collect'));
        // Version 2 checks the order before charging it: a step inserted where the job already was.
        if (version === 2) await ctx.step('verify', () => void ran.push('verify'));
        await ctx.step(
          'charge',
          () => {
            ran.push(`charge v${version}`);
            if (version === 1) throw new Error('card declined');
          },
          { backoff: { type: 'constant', delayMs: 3_600_000 } },
        );
      },
    });
    const id = await enqueue(kind);
    expect(await run([kind])).toMatchObject({ retried: 1 }); // charge failed once; its retry is an hour away
    version = 2; // deployed meanwhile
    await admin.query(`update "${schema}".jobs set run_at = now() where id = $1`, [id]); // the hour passes
    expect(await run([kind])).toMatchObject({ dead: 1 });
    expect(await jobRow(id)).toMatchObject({ state: 'dead', dead_reason: 'step_order_changed' });
    // Replayed from the first step that changed: charge, where version 2 now has verify.
    expect((await cli('dlq', 'replay', id, '--from-step', 'charge')).code).toBe(EXIT.ok);
    expect(await stepRows(id)).toEqual([{ name: 'collect', state: 'completed', attempts: 1, result: null }]);
    expect(await run([kind])).toMatchObject({ completed: 1, dead: 0 });
    expect(ran).toEqual(['collect', 'charge v1', 'verify', 'charge v2']);
    expect((await stepRows(id)).map((s) => [s.name, s.state])).toEqual([
      ['collect', 'completed'],
      ['verify', 'completed'],
      ['charge', 'completed'],
    ]);
  });
});
