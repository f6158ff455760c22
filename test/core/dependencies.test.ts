import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidOptionsError } from '../../base/errors.js';
import type { ParentJob } from '../../base/rows.js';
import { cancel, getJob, moveToDlq } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { jsonLogger, silentLogger } from '../../core/logger.js';
import { replay as replayDead } from '../../core/replay.js';
import { createWorker, type WorkerOptions } from '../../core/worker/index.js';
import { type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';

let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-dependencies', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const run = (jobs: WorkerOptions['jobs'], options: Partial<WorkerOptions> = {}) =>
  createWorker({ db: t.db, schema: t.schema, jobs, logger: silentLogger, ...options }).runInvocation({
    remainingMs: 60_000,
  });
const job = async (id: string) =>
  (await getJob(t.db, id, { schema: t.schema })) as NonNullable<Awaited<ReturnType<typeof getJob>>>;
const status = async (id: string) =>
  (await t.admin.query(`select status from "${t.schema}".job_status where id = $1`, [id])).rows[0]?.status as string;

/** Kinds that record the order they ran in; `fail` dies at once (one attempt). */
function steps() {
  const ran: string[] = [];
  const seen = new Map<string, ParentJob[]>();
  const step = defineJob({
    kind: 'step',
    payload: z.object({ name: z.string() }),
    handler: async (p, ctx) => {
      seen.set(p.name, await ctx.parents());
      ran.push(p.name);
      return { made: p.name };
    },
  });
  const fail = defineJob({
    kind: 'fail',
    payload: z.object({ name: z.string() }),
    maxAttempts: 1,
    handler: (p) => {
      ran.push(p.name);
      throw new Error(`${p.name} failed`);
    },
  });
  return { ran, seen, step, fail };
}

describe(`dependencies between jobs (${testDriver()})`, () => {
  it('a chain runs in order in one invocation; each step waits, then reads its parent’s result', async () => {
    const { ran, seen, step } = steps();
    const [a, b, c] = await q.enqueueChain(t.db, [
      step.with({ name: 'a' }),
      step.with({ name: 'b' }),
      step.with({ name: 'c' }),
    ]);
    expect([a?.outcome, b?.outcome, c?.outcome]).toEqual(['inserted', 'inserted', 'inserted']);
    expect(await status(a?.id as string)).toBe('ready');
    expect(await status(b?.id as string)).toBe('waiting');
    expect(await status(c?.id as string)).toBe('waiting');
    expect(await job(b?.id as string)).toMatchObject({
      after: [a?.id],
      dependents: [c?.id],
      onParentFailure: 'cancel',
    });
    expect(await run([step])).toMatchObject({ completed: 3 });
    expect(ran).toEqual(['a', 'b', 'c']);
    expect(seen.get('a')).toEqual([]);
    expect(seen.get('b')).toEqual([{ id: a?.id, kind: 'step', state: 'completed', result: { made: 'a' } }]);
    expect(seen.get('c')).toEqual([{ id: b?.id, kind: 'step', state: 'completed', result: { made: 'b' } }]);
  });

  it('a fan-out and fan-in flow: the join runs after every branch, with all their results', async () => {
    const { ran, seen, step } = steps();
    const flow = await q.enqueueFlow(t.db, {
      extract: step.with({ name: 'extract' }),
      left: step.with({ name: 'left' }, { after: ['extract'] }),
      right: step.with({ name: 'right' }, { after: ['extract'] }),
      join: step.with({ name: 'join' }, { after: ['left', 'right'] }),
    });
    expect(Object.keys(flow)).toEqual(['extract', 'left', 'right', 'join']);
    expect(await run([step], { concurrency: 2 })).toMatchObject({ completed: 4 });
    expect(ran[0]).toBe('extract');
    expect(ran.slice(1, 3).sort()).toEqual(['left', 'right']);
    expect(ran[3]).toBe('join');
    expect(seen.get('join')?.map((p) => [p.id, p.result])).toEqual([
      [flow.left.id, { made: 'left' }],
      [flow.right.id, { made: 'right' }],
    ]);
  });

  it('enqueue after existing jobs: completed → ready at once, unknown id → counts as completed, running → waits', async () => {
    const { step } = steps();
    const [done] = await q.enqueueMany(t.db, [step.with({ name: 'done' })]);
    await run([step]);
    const [later] = await q.enqueueMany(t.db, [step.with({ name: 'later' })]);
    const ready = await q.enqueue(t.db, step, { name: 'x' }, { after: [done as { id: string }] });
    const gone = await q.enqueue(t.db, step, { name: 'y' }, { after: ['999999999'] });
    const waits = await q.enqueue(t.db, step, { name: 'z' }, { after: [later?.id as string, done?.id as string] });
    expect(await status(ready.id)).toBe('ready');
    expect(await status(gone.id)).toBe('ready');
    expect(await status(waits.id)).toBe('waiting');
    expect(await job(later?.id as string)).toMatchObject({ dependents: [waits.id] });
    expect(await run([step])).toMatchObject({ completed: 4 });
    expect((await job(waits.id)).state).toBe('completed');
  });

  it("a parent that dies cancels its waiting children and theirs as dependency_failed; 'run' children run", async () => {
    const { ran, seen, step, fail } = steps();
    const flow = await q.enqueueFlow(t.db, {
      parent: fail.with({ name: 'parent' }),
      child: step.with({ name: 'child' }, { after: ['parent'] }),
      grandchild: step.with({ name: 'grandchild' }, { after: ['child'] }),
      anyway: step.with({ name: 'anyway' }, { after: ['parent'], onParentFailure: 'run' }),
    });
    const lines: string[] = [];
    const logger = jsonLogger({ write: (line) => lines.push(line) });
    expect(await run([step, fail], { logger })).toMatchObject({ dead: 1, completed: 1 });
    expect(ran).toEqual(['parent', 'anyway']);
    // The dead parent's line says jobs waited for it (cancelled or released by its end).
    const parentLine = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'job' && l.jobId === flow.parent.id);
    expect(parentLine).toMatchObject({ outcome: 'dead', hasDependents: true });
    expect(seen.get('anyway')).toEqual([{ id: flow.parent.id, kind: 'fail', state: 'dead', result: null }]);
    for (const name of ['child', 'grandchild'] as const) {
      expect(await job(flow[name].id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
    }
    // A child enqueued after the dead parent is cancelled at once, with what waits for it.
    const late = await q.enqueueFlow(t.db, {
      child: step.with({ name: 'late' }, { after: [flow.parent.id] }),
      next: step.with({ name: 'late-next' }, { after: ['child'] }),
    });
    expect(await job(late.child.id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
    expect(await job(late.next.id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
  });

  it('a parent moved to the DLQ by hand cancels its waiting child; replaying the parent brings the child back', async () => {
    const { ran, step } = steps();
    const chain = await q.enqueueChain(t.db, [step.with({ name: 'parent' }), step.with({ name: 'child' })]);
    const [parent, child] = chain as [(typeof chain)[0], (typeof chain)[0]];
    await moveToDlq(t.db, [parent.id], { schema: t.schema, by: 'ops' });
    expect(await job(child.id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
    await replayDead(t.db, { ids: [parent.id], schema: t.schema, by: 'ops' });
    expect(await status(child.id)).toBe('waiting');
    expect(await run([step])).toMatchObject({ completed: 2 });
    expect(ran).toEqual(['parent', 'child']);
  });

  it('replaying a dead parent brings its cancelled children back; they run after it completes', async () => {
    let failing = true;
    const ran: string[] = [];
    const flaky = defineJob({
      kind: 'flaky',
      payload: z.object({ name: z.string() }),
      maxAttempts: 1,
      handler: (p) => {
        ran.push(p.name);
        if (failing) throw new Error('down');
        return 'ok';
      },
    });
    const flow = await q.enqueueFlow(t.db, {
      parent: flaky.with({ name: 'parent' }),
      other: flaky.with({ name: 'other' }),
      child: flaky.with({ name: 'child' }, { after: ['parent'] }),
      both: flaky.with({ name: 'both' }, { after: ['parent', 'other'] }),
      grandchild: flaky.with({ name: 'grandchild' }, { after: ['child'] }),
    });
    expect(await run([flaky])).toMatchObject({ dead: 2 });
    failing = false;
    const replay = await replayDead(t.db, { ids: [flow.parent.id], schema: t.schema, by: 'test' });
    expect(replay.replayed.map((r) => r.id)).toEqual([flow.parent.id]);
    // Back waiting, except the one whose other parent is still dead.
    expect(await status(flow.child.id)).toBe('waiting');
    expect(await status(flow.grandchild.id)).toBe('waiting');
    expect(await job(flow.both.id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
    expect(await run([flaky])).toMatchObject({ completed: 3 });
    expect(ran.slice(2)).toEqual(['parent', 'child', 'grandchild']);
    // Replaying the other parent too brings the last child back; it runs.
    await replayDead(t.db, { ids: [flow.other.id], schema: t.schema, by: 'test' });
    expect(await run([flaky])).toMatchObject({ completed: 2 });
    expect((await job(flow.both.id)).state).toBe('completed');
  });

  it('cancelling a waiting parent cancels its children', async () => {
    const { step } = steps();
    const flow = await q.enqueueFlow(t.db, {
      parent: step.with({ name: 'p' }),
      child: step.with({ name: 'c' }, { after: ['parent'] }),
    });
    await cancel(t.db, [flow.parent.id], { schema: t.schema });
    expect(await job(flow.child.id)).toMatchObject({ state: 'cancelled', deadReason: 'dependency_failed' });
    expect(await run([step])).toMatchObject({ claimed: 0 });
  });

  it("completedJobs 'delete' keeps a parent's row (and result) for its children, and deletes the rest", async () => {
    const { seen, step } = steps();
    const [plain] = await q.enqueueMany(t.db, [step.with({ name: 'plain' })]);
    const flow = await q.enqueueFlow(t.db, {
      parent: step.with({ name: 'parent' }),
      child: step.with({ name: 'child' }, { after: ['parent'] }),
    });
    expect(await run([step], { completedJobs: 'delete' })).toMatchObject({ completed: 3 });
    expect(seen.get('child')?.[0]).toMatchObject({ id: flow.parent.id, result: { made: 'parent' } });
    expect(await getJob(t.db, plain?.id as string, { schema: t.schema })).toBeNull();
    expect(await getJob(t.db, flow.child.id, { schema: t.schema })).toBeNull();
    expect((await job(flow.parent.id)).state).toBe('completed');
  });

  it('a child with a dedupe key enqueued again is deduplicated: the holder keeps its own parents', async () => {
    const { ran, step } = steps();
    const first = await q.enqueueFlow(t.db, {
      p: step.with({ name: 'p1' }),
      c: step.with({ name: 'c' }, { after: ['p'], dedupe: { key: 'report' } }),
    });
    const second = await q.enqueueFlow(t.db, {
      p: step.with({ name: 'p2' }),
      c: step.with({ name: 'c' }, { after: ['p'], dedupe: { key: 'report' } }),
    });
    expect(second.c).toEqual({ id: first.c.id, outcome: 'deduplicated' });
    expect(await job(first.c.id)).toMatchObject({ after: [first.p.id] });
    expect(await run([step])).toMatchObject({ completed: 3 });
    expect(ran.filter((n) => n === 'c')).toHaveLength(1);
    expect(ran.indexOf('c')).toBeGreaterThan(ran.indexOf('p1'));
  });

  it('refuses what it cannot honour, with a clear error, and writes nothing', async () => {
    const { step } = steps();
    const bad: [() => Promise<unknown>, RegExp][] = [
      [() => q.enqueue(t.db, step, { name: 'x' }, { after: ['1'], runAt: new Date() }), /runAt or delayMs/],
      [() => q.enqueue(t.db, step, { name: 'x' }, { after: ['1'], orderingKey: 'k' }), /ordering key/],
      [() => q.enqueue(t.db, step, { name: 'x' }, { after: ['1'], dedupe: { key: 'k', mode: 'replace' } }), /replace/],
      [() => q.enqueue(t.db, step, { name: 'x' }, { after: ['not-an-id'] }), /"not-an-id" is not a job id/],
      [() => q.enqueue(t.db, step, { name: 'x' }, { onParentFailure: 'run' }), /onParentFailure needs after/],
      [
        () =>
          q.enqueueFlow(t.db, {
            a: step.with({ name: 'a' }, { after: ['b'] }),
            b: step.with({ name: 'b' }, { after: ['a'] }),
          }),
        /cycle: a → b → a/,
      ],
      [() => q.enqueueFlow(t.db, { a: step.with({ name: 'a' }, { after: ['a'] }) }), /cycle: a → a/],
      [
        () => q.enqueueFlow(t.db, { a: step.with({ name: 'a' }, { after: ['nope'] }) }),
        /"nope" is not a job id or the name of another step/,
      ],
      [
        () =>
          q.enqueueFlow(t.db, {
            a: step.with({ name: 'a' }, { dedupe: { key: 'k' } }),
            b: step.with({ name: 'b' }, { after: ['a'] }),
          }),
        /step a has a dedupe key/,
      ],
      [() => q.enqueueFlow(t.db, { '42': step.with({ name: 'a' }) }), /flow step name "42"/],
    ];
    for (const [call, message] of bad) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidOptionsError);
      expect((err as Error).message).toMatch(message);
    }
    const { rows } = await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs`);
    expect(rows[0].n).toBe(0);
  });
});
