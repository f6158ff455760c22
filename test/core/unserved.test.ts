import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { createVercelMaintenance } from '../../adapters/vercel.js';
import { stats } from '../../core/admin.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { createWorker } from '../../core/worker/index.js';
import { buryDoomed } from '../../db/statements/bury.js';
import { ManualClock } from '../../testing/clock.js';
import { databaseUrl, type TestContext, useTestSchema } from '../helpers/db.js';
import { enqueuerFor } from '../helpers/kinds.js';
import { captureStatements } from '../helpers/statements.js';
import { captureStdout } from '../helpers/stdout.js';

// "A queue no deployed worker serves is silent": workers record what they serve, and the stats flag
// ready jobs on a queue and kind no worker served lately.
let t: TestContext;
let q: ReturnType<typeof enqueuerFor>;
useTestSchema('core-unserved', (ctx) => {
  t = ctx;
  q = enqueuerFor(ctx.schema);
});

const payload = z.object({ n: z.number() });
const mail = defineJob({ kind: 'mail', queue: 'emails', payload, handler: () => {} });
// No `queue`: on 'default', which the worker below does not serve.
const report = defineJob({ kind: 'report', payload, handler: () => {} });
const byKind = async () => Object.fromEntries((await stats(t.db, { schema: t.schema })).map((r) => [r.kind, r]));

describe('queues no worker serves', () => {
  it('flags ready jobs on a queue no worker served; nothing before any worker recorded itself', async () => {
    await q.enqueueMany(t.db, [report.with({ n: 1 }), mail.with({ n: 2 })]);
    // No worker has recorded itself yet: nothing to judge by.
    expect((await byKind()).report).toMatchObject({ ready: 1, unserved: false });
    const clock = new ManualClock();
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [mail, report],
      queues: ['emails'],
      name: 'emails-worker',
      logger: silentLogger,
      clock,
    });
    expect(await worker.runInvocation({ remainingMs: 60_000 })).toMatchObject({ completed: 1 });
    const rows = await byKind();
    expect(rows.report).toMatchObject({ queue: 'default', ready: 1, unserved: true });
    const seen = await t.admin.query(`select name, queues, kinds from "${t.schema}".workers`);
    expect(seen.rows).toEqual([{ name: 'emails-worker', queues: ['emails'], kinds: ['mail', 'report'] }]);
    // A worker for every queue: served.
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [report],
      logger: silentLogger,
      drain: false,
    }).runInvocation({
      remainingMs: 60_000,
    });
    await q.enqueueMany(t.db, [report.with({ n: 3 })]);
    expect((await byKind()).report).toMatchObject({ ready: 1, unserved: false });
  });

  it('a worker last seen 11 minutes ago no longer counts; a warm instance records itself once a minute', async () => {
    await q.enqueueMany(t.db, [mail.with({ n: 1 })]);
    const elevenMinutesAgo = new Date(Date.now() - 11 * 60_000);
    await buryDoomed(t.db.executor, t.schema, {
      kinds: ['mail'],
      queues: ['emails'],
      limit: 10,
      now: elevenMinutesAgo,
      served: { name: 'old' },
    });
    expect((await byKind()).mail).toMatchObject({ ready: 1, unserved: true });
    const clock = new ManualClock();
    const worker = createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [mail],
      queues: ['emails'],
      logger: silentLogger,
      clock,
    });
    // Whether an invocation moved the worker's row (its seen_at, on the database clock). The sweep
    // carries the record every time (one statement text); it writes it at most once a minute.
    const seenAt = async () =>
      String(
        (await t.admin.query(`select max(seen_at)::text as at from "${t.schema}".workers where name = 'worker'`))
          .rows[0]?.at,
      );
    const seenIn = async () => {
      const before = await seenAt();
      const { texts } = await captureStatements('pg', () => worker.runInvocation({ remainingMs: 60_000 }));
      expect(texts.filter((text) => /worker_seen/.test(text))).toHaveLength(1);
      return (await seenAt()) === before ? 0 : 1;
    };
    expect(await seenIn()).toBe(1);
    expect(await seenIn()).toBe(0); // the same warm instance, within the minute
    clock.advance(60_000);
    expect(await seenIn()).toBe(1);
    await q.enqueueMany(t.db, [mail.with({ n: 2 })]);
    expect((await byKind()).mail).toMatchObject({ unserved: false });
  });

  it('the maintenance tick logs queue_unserved for each queue and kind whose ready jobs no worker serves', async () => {
    await createWorker({
      db: t.db,
      schema: t.schema,
      jobs: [mail],
      queues: ['emails'],
      logger: silentLogger,
    }).runInvocation({
      remainingMs: 60_000,
    });
    await q.enqueueMany(t.db, [report.with({ n: 1 })]);
    const maintenance = createVercelMaintenance({
      env: {
        DATABASE_URL: databaseUrl(),
        SKIPLOCK_SCHEMA: t.schema,
        CRON_SECRET: 'cron-secret-0123456789',
        SKIPLOCK_LOG_LEVEL: 'info',
      },
    });
    try {
      const { result, lines } = await captureStdout(() =>
        maintenance(
          new Request('https://app.example.com/api/maintenance', {
            headers: { authorization: 'Bearer cron-secret-0123456789' },
          }),
        ),
      );
      expect(result.status).toBe(200);
      const warned = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'queue_unserved');
      expect(warned).toEqual([expect.objectContaining({ level: 'warn', queue: 'default', kind: 'report', ready: 1 })]);
    } finally {
      await resetSharedRuntime();
    }
  });
});
