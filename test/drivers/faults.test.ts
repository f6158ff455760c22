import { type AddressInfo, createServer } from 'node:net';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DatabaseUnreachableError, OutcomeUnknownError } from '../../base/errors.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { connect } from '../../db/connect.js';
import { toSkiplockError } from '../../db/execute.js';
import { localNeonOptions } from '../../testing/neon-local.js';
import { databaseUrl, testDriver } from '../helpers/db.js';
import { type FaultyContext, useFaultySchema } from '../helpers/faulty.js';

// What each driver guarantees when the network fails around a statement, with the fault made by
// the stand-in the driver talks to (a TCP proxy for pg, Neon's WebSocket proxy, Neon's HTTP
// endpoint): an answer lost after the statement committed is an OutcomeUnknownError, and a dedupe
// key makes the retry safe; a statement that never reached Postgres wrote nothing.
let t: FaultyContext;
useFaultySchema('drivers-faults', (ctx) => {
  t = ctx;
});

const note = defineJob({ kind: 'note', payload: z.object({ n: z.number() }), timeoutMs: 2_000 });
const q = () => createEnqueuer({ schema: t.schema });
const count = async (where = 'true') =>
  Number((await t.admin.query(`select count(*)::int as n from "${t.schema}".jobs where ${where}`)).rows[0].n);
const INSERT = 'insert into';

/** A port of 127.0.0.1 on which nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe(`an enqueue when the network fails (${testDriver()})`, () => {
  it('whose answer is lost after it committed: OutcomeUnknownError, and the job exists', async () => {
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    const error = await q()
      .enqueue(t.db, note, { n: 1 })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect((error as OutcomeUnknownError).code).toBe('outcome_unknown');
    expect((error as Error).message).toMatch(/may have committed.*dedupe key/);
    expect((error as Error).message).not.toMatch(/postgres(ql)?:\/\//);
    expect(await count()).toBe(1);
  });

  it('retried with the same dedupe key after a lost answer: the first job, deduplicated, and no second', async () => {
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    const dedupe = { key: 'order-7', mode: 'skip' as const };
    await expect(q().enqueue(t.db, note, { n: 1 }, { dedupe })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const [first] = (await t.admin.query(`select id::text as id from "${t.schema}".jobs`)).rows;
    const retry = await q().enqueue(t.db, note, { n: 1 }, { dedupe });
    expect(retry).toEqual({ id: first.id, outcome: 'deduplicated' });
    expect(await count()).toBe(1);
  });

  it('a window key spanning the retry still holds once the first job has completed', async () => {
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    const dedupe = { key: 'welcome:user-42', mode: 'window' as const, windowMs: 1_000 * 365 * 24 * 3600_000 };
    await expect(q().enqueue(t.db, note, { n: 1 }, { dedupe })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'completed', attempt = 1, started_at = now(), finished_at = now()`,
    );
    const retry = await q().enqueue(t.db, note, { n: 1 }, { dedupe });
    expect(retry.outcome).toBe('deduplicated');
    expect(await count()).toBe(1);
  });

  it('without a dedupe key, the retry makes a second job (what the docs warn of)', async () => {
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    await expect(q().enqueue(t.db, note, { n: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await q().enqueue(t.db, note, { n: 1 });
    expect(await count()).toBe(2);
  });

  it('many jobs and a flow, each in one statement: a lost answer leaves all of them, keyed retries add none', async () => {
    const many = [1, 2, 3].map((n) => note.with({ n }, { dedupe: { key: `m${n}` } }));
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    await expect(q().enqueueMany(t.db, many)).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect((await q().enqueueMany(t.db, many)).map((r) => r.outcome)).toEqual([
      'deduplicated',
      'deduplicated',
      'deduplicated',
    ]);
    const flow = { a: note.with({ n: 4 }), b: note.with({ n: 5 }, { after: ['a'] }) };
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    await expect(q().enqueueFlow(t.db, flow)).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(await count()).toBe(5);
  });

  it('refused or dropped before it ran: an error, nothing written, and the retry writes it once', async () => {
    for (const mode of ['refuse', 'drop'] as const) {
      t.faults.inject({ mode, match: INSERT });
      const error = await q()
        .enqueue(t.db, note, { n: 1 }, { dedupe: { key: `k-${mode}` } })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(error).toBeInstanceOf(Error);
      expect(['outcome_unknown', 'database_unreachable']).toContain((error as { code?: string }).code);
      expect(await count(`dedupe_key = 'k-${mode}'`)).toBe(0);
      expect((await q().enqueue(t.db, note, { n: 1 }, { dedupe: { key: `k-${mode}` } })).outcome).toBe('inserted');
    }
    expect(await count()).toBe(2);
  });

  it('a slow answer within the client timeout is only slow', async () => {
    t.faults.inject({ mode: 'slow', match: INSERT, delayMs: 300 });
    expect((await q().enqueue(t.db, note, { n: 1 })).outcome).toBe('inserted');
    expect(await count()).toBe(1);
  });

  it('an answer that never comes is cut off at queryTimeoutMs as an unknown outcome', async () => {
    const db = t.open({ max: 1, queryTimeoutMs: 400 });
    try {
      t.faults.inject({ mode: 'half-open', match: INSERT, delayMs: 5_000 });
      await expect(q().enqueue(db, note, { n: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    } finally {
      await db.close();
    }
    // Committed or not: the statement reached Postgres, but a frame after it (neon-ws sends Sync on
    // its own) may not have.
    expect(await count()).toBeLessThanOrEqual(1);
  });

  it('a database that cannot be reached at all: DatabaseUnreachableError, which says so', async () => {
    const port = await closedPort();
    const url = new URL(databaseUrl());
    url.port = String(port);
    const driver = testDriver();
    const neon = localNeonOptions({ wsProxyPort: port, httpUrl: `http://127.0.0.1:${port}/sql` });
    const db = connect({ connectionString: driver === 'pg' ? url.toString() : databaseUrl(), driver, neon });
    try {
      const error = await q()
        .enqueue(db, note, { n: 1 })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(error).toBeInstanceOf(DatabaseUnreachableError);
      expect((error as Error).message).toMatch(/^cannot reach the database: /);
    } finally {
      await db.close();
      // Neon keeps its settings process-wide: point them back at this file's stand-in.
      await t.open().close();
    }
  });
});

describe(`the caller's own transaction when its COMMIT's answer is lost (${testDriver()})`, () => {
  it('throws the driver error, which toSkiplockError reads as an unknown outcome; the job committed', async () => {
    if (!t.db.interactiveTransactions) {
      expect(t.db.driver).toBe('neon-http'); // no interactive transactions there: the batch below
      return;
    }
    // Armed on the enqueue's insert, the fault drops the connection once the transaction ends.
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    const error = await t.db.db
      .transaction(async (tx) => {
        await q().enqueue(tx, note, { n: 1 }, { dedupe: { key: 'tx-1', mode: 'window', windowMs: 60_000 } });
      })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(OutcomeUnknownError); // the COMMIT is the caller's statement
    expect(toSkiplockError(error).code).toBe('outcome_unknown');
    expect(await count()).toBe(1); // it had committed
  });
});

describe(`neon-http's batch when its answer is lost (${testDriver()})`, () => {
  it('the caller learns the outcome is unknown, and a keyed retry in a new batch adds nothing', async () => {
    if (!('batch' in t.db.db)) {
      expect(t.db.driver).not.toBe('neon-http');
      return;
    }
    const db = t.db.db as unknown as {
      batch(queries: unknown[]): Promise<unknown[]>;
      execute(query: unknown): unknown;
    };
    const prepared = () => q().prepareEnqueue([note.with({ n: 1 }, { dedupe: { key: 'batch-1' } })]);
    t.faults.inject({ mode: 'lose-answer', match: INSERT });
    const first = prepared();
    const error = await db.batch([db.execute(sql`select 1`), ...first.statements.map((s) => db.execute(s))]).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(Error);
    const second = prepared();
    const [, ...raw] = await db.batch([db.execute(sql`select 1`), ...second.statements.map((s) => db.execute(s))]);
    expect(second.read(raw)[0]?.outcome).toBe('deduplicated');
    expect(await count()).toBe(1);
  });
});
