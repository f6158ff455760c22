import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { silentLogger } from '../../core/logger.js';
import { replay } from '../../core/replay.js';
import { createWorker } from '../../core/worker/index.js';
import { connect, type SkiplockDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { openAdminPool, schemaFor } from '../helpers/db.js';
import { startPgBouncer } from '../helpers/pgbouncer.js';

// Everything the hot path does, through PgBouncer in transaction mode: no session state, no
// prepared statements, no advisory session locks, no LISTEN (SPEC §2, invariant 7).
let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
let db: SkiplockDb;
const admin = openAdminPool();
const schema = schemaFor('pgbouncer');
const q = createEnqueuer({ schema });
let failFirst = true;
const task = defineJob({
  kind: 'task',
  payload: z.object({ n: z.number() }),
  timeoutMs: 2_000,
  maxAttempts: 1,
  handler: (p) => {
    if (p.n === 0 && failFirst) throw new Error('first run fails');
  },
});
const txTask = defineJob({
  kind: 'tx-task',
  payload: z.object({ n: z.number() }),
  timeoutMs: 2_000,
  transactional: true,
  handler: async () => {},
});

beforeAll(async () => {
  const { inject } = await import('vitest');
  bouncer = await startPgBouncer(inject('databaseUrl'));
  await admin.query(`drop schema if exists "${schema}" cascade`);
  // statement_timeout is a startup parameter PgBouncer refuses: 0 sends none (set it on the role).
  db = connect({ connectionString: bouncer.url, statementTimeoutMs: 0, max: 4 });
}, 60_000);
afterAll(async () => {
  await db?.close();
  await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin.end();
  await bouncer?.stop();
});

describe('through PgBouncer in transaction mode', () => {
  it('migrates, enqueues in every dedupe mode and inside a transaction, runs, fails, replays', async () => {
    expect((await migrate(db, { schema })).applied.length).toBeGreaterThan(0);
    await q.enqueueMany(
      db,
      Array.from({ length: 50 }, (_, n) => task.with({ n })),
    );
    expect((await q.enqueue(db, task, { n: 100 }, { dedupe: { key: 'a' } })).outcome).toBe('inserted');
    expect((await q.enqueue(db, task, { n: 101 }, { dedupe: { key: 'a' } })).outcome).toBe('deduplicated');
    expect((await q.enqueue(db, task, { n: 102 }, { dedupe: { key: 'r', mode: 'replace' } })).outcome).toBe('inserted');
    expect((await q.enqueue(db, task, { n: 103 }, { dedupe: { key: 'r', mode: 'replace' } })).outcome).toBe('replaced');
    await db.db.transaction(async (tx) => {
      await q.enqueue(tx, txTask, { n: 1 });
    });
    const summary = await createWorker({
      db,
      schema,
      jobs: [task, txTask],
      logger: silentLogger,
      concurrency: 20,
    }).runInvocation({
      remainingMs: 20_000,
    });
    expect(summary).toMatchObject({ stoppedBecause: 'drained', completed: 52, dead: 1 });
    failFirst = false;
    const replayed = await replay(db, { schema, reason: 'max_attempts' });
    expect(replayed.replayed).toHaveLength(1);
    const again = await createWorker({ db, schema, jobs: [task], logger: silentLogger }).runInvocation({
      remainingMs: 20_000,
    });
    expect(again).toMatchObject({ completed: 1 });
  });

  it('concurrent claimers through the pooler never share a job', async () => {
    await q.enqueueMany(
      db,
      Array.from({ length: 400 }, (_, n) => task.with({ n: n + 1000 })),
    );
    const loops = Array.from({ length: 4 }, () =>
      connect({ connectionString: bouncer.url, statementTimeoutMs: 0, max: 1 }),
    );
    const seen: string[] = [];
    const spy = defineJob({
      kind: 'task',
      payload: z.object({ n: z.number() }),
      timeoutMs: 2_000,
      handler: (_p, ctx) => {
        seen.push(ctx.id);
      },
    });
    await Promise.all(
      loops.map((c) =>
        createWorker({ db: c, schema, jobs: [spy], logger: silentLogger, concurrency: 25 }).runInvocation({
          remainingMs: 20_000,
        }),
      ),
    );
    await Promise.all(loops.map((c) => c.close()));
    expect(seen).toHaveLength(400);
    expect(new Set(seen).size).toBe(400);
  });
});
