import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { z } from 'zod';
import { EXIT } from '../../cli/run.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { connect } from '../../db/connect.js';
import { ManualClock } from '../../testing/clock.js';
import { cliOn } from '../helpers/cli.js';

// `skiplock stats` names each queue and kind whose ready jobs no worker served lately (a queue that
// is in code but in no deployed worker's SKIPLOCK_QUEUES), against a real database.
const schema = `cli_unserved_${randomBytes(4).toString('hex')}`;
let admin: pg.Pool;
let db: ReturnType<typeof connect>;

const cli = cliOn(schema);

const payload = z.object({ n: z.number() });
const mail = defineJob({ kind: 'mail', queue: 'emails', payload, handler: () => {} });
// No `queue`: on 'default', which the worker below does not serve.
const report = defineJob({ kind: 'report', payload, handler: () => {} });

const NO_WORKER = /no worker served queue/;
const reportLine =
  'no worker served queue default (kind report) in the last 10 min: 2 ready; does a deployed worker list this queue (SKIPLOCK_QUEUES) and kind?';

beforeAll(async () => {
  admin = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
  db = connect({ connectionString: inject('databaseUrl') });
});
afterAll(async () => {
  await db?.close();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
});

describe('skiplock stats and queues no worker serves', () => {
  it('prints a "no worker" line for each queue and kind with ready jobs that no worker served, and only those', async () => {
    expect((await cli('migrate')).code).toBe(EXIT.ok);
    const q = createEnqueuer({ schema });
    await q.enqueueMany(db, [report.with({ n: 1 }), report.with({ n: 2 }), mail.with({ n: 3 })]);

    // No worker has recorded itself yet: nothing to judge by, no line.
    const unjudged = await cli('stats');
    expect(unjudged.code).toBe(EXIT.ok);
    expect(unjudged.out).toMatch(/default\s+report\s+2/);
    expect(unjudged.out).not.toMatch(NO_WORKER);

    // A worker of queue 'emails' (both kinds in its code) runs, and records what it serves.
    const summary = await createWorker({
      db,
      schema,
      jobs: [mail, report],
      queues: ['emails'],
      name: 'emails-worker',
      logger: silentLogger,
    }).runInvocation({ remainingMs: 60_000 });
    expect(summary).toMatchObject({ completed: 1 });
    // A mail enqueued after it: ready, on a queue a worker serves.
    await q.enqueue(db, mail, { n: 4 });

    const human = await cli('stats');
    expect(human.code).toBe(EXIT.ok);
    const lines = human.out.split('\n');
    expect(lines.filter((l) => NO_WORKER.test(l))).toEqual([reportLine]);
    // Between the depth table and the activity table.
    const at = lines.indexOf(reportLine);
    expect(lines.slice(0, at).some((l) => /emails\s+mail\s+1/.test(l))).toBe(true);
    expect(lines.slice(at).some((l) => /^last 300 s:/.test(l))).toBe(true);

    const { depth } = JSON.parse((await cli('stats', '--json')).out);
    expect(depth).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ queue: 'default', kind: 'report', ready: 2, unserved: true }),
        expect.objectContaining({ queue: 'emails', kind: 'mail', ready: 1, unserved: false }),
      ]),
    );

    // A worker for every queue serves 'default' too: the line goes.
    await createWorker({ db, schema, jobs: [report], logger: silentLogger, drain: false }).runInvocation({
      remainingMs: 60_000,
    });
    await q.enqueue(db, report, { n: 5 });
    const served = await cli('stats');
    expect(served.out).toMatch(/default\s+report\s+[1-9]/);
    expect(served.out).not.toMatch(NO_WORKER);
  });

  it('prints a "no worker fits" line for a kind whose timeout fits no serving worker\'s invocations', async () => {
    const slow = defineJob({ kind: 'slow', queue: 'slow', payload, timeoutMs: 30_000, handler: () => {} });
    const [job] = await createEnqueuer({ schema }).enqueueMany(db, [slow.with({ n: 1 })]);
    // The case: a 15 s invocation, a kind of 30 s. It claims nothing, and records why.
    const summary = await createWorker({
      db,
      schema,
      jobs: [slow],
      queues: ['slow'],
      name: 'slow-worker',
      logger: silentLogger,
      clock: new ManualClock(),
    }).runInvocation({ remainingMs: 15_000 });
    expect(summary).toMatchObject({ claimed: 0, stoppedBecause: 'no_kind_fits' });
    const human = await cli('stats');
    expect(human.code).toBe(EXIT.ok);
    expect(human.out.split('\n').filter((l) => /fits kind/.test(l))).toEqual([
      "no worker that serves queue slow fits kind slow's timeoutMs: 1 ready; the longest invocation has 14000 ms for attempts; raise the function's timeout or lower the kind's timeoutMs",
    ]);
    const { depth } = JSON.parse((await cli('stats', '--json')).out);
    expect(depth).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          queue: 'slow',
          kind: 'slow',
          ready: 1,
          unserved: false,
          unfit: { budgetMs: 14_000 },
        }),
      ]),
    );
    // `jobs why` names the hold and what to do.
    const why = await cli('jobs', 'why', job?.id as string);
    expect(why.code).toBe(EXIT.ok);
    expect(why.out).toContain(
      "- no_worker_fits: no invocation of the workers that serve queue slow fits kind slow's timeoutMs: the longest has 14000 ms for attempts",
    );
  });
});
