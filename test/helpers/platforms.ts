import type pg from 'pg';
import { expect } from 'vitest';
import * as z from 'zod/mini';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import type { ManualClock } from '../../testing/clock.js';
import { databaseUrl, type TestContext, testDriver } from './db.js';

/**
 * Waits until `read` returns a value `done` accepts, reading every 25 ms, for at most `timeoutMs`:
 * the outcome of work another runtime does (a nudge's invocation runs after the response that
 * started it), not a wait for time to pass.
 */
export async function waitForOutcome<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000) {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started > timeoutMs) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

export interface JobRow {
  state: string;
  attempt: number;
  result: unknown;
  kind: string;
}

/** One job's state as the database holds it, read outside the runtime under test. */
export async function jobRow(admin: pg.Pool, schema: string, id: string): Promise<JobRow | undefined> {
  const { rows } = await admin.query(`select state, attempt, result, kind from "${schema}".jobs where id = $1`, [id]);
  return rows[0] as JobRow | undefined;
}

/** Workers' limit on a Worker's size after compression: 3 MiB on the Free plan (10 MiB on Paid). */
export const WORKERS_FREE_PLAN_GZIP_LIMIT = 3 * 1024 * 1024;

/** A platform app's environment on the test database's `schema`, with the secrets and `extra`. */
export const platformEnv = (schema: string, extra: Record<string, string> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: schema,
  SKIPLOCK_LOG_LEVEL: 'error',
  ...PLATFORM_SECRETS,
  ...extra,
});

export const PLATFORM_SECRETS = {
  CRON_SECRET: 'cron-secret-0123456789abcdef-0123456789',
  SKIPLOCK_ENQUEUE_TOKEN: 'enqueue-token-0123456789abcdef-0123456789',
  SKIPLOCK_ADMIN_TOKEN: 'admin-token-0123456789abcdef-0123456789',
  SKIPLOCK_SIGNAL_SECRET: 'signal-secret-0123456789abcdef-0123456789',
} as const;

/** What the tests call on a Worker running in Miniflare. */
/**
 * An app served over HTTP as its clients call it: a JSON POST with a bearer token, and an enqueue
 * through its route (optionally on `queue`) that answers the job's id.
 */
export function httpRequests(origin: () => string) {
  const post = (path: string, token: string | undefined, body: unknown) =>
    fetch(`${origin()}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  return {
    post,
    async enqueue(kind: string, payload: unknown, queue?: string): Promise<string> {
      const response = await post('/skiplock/enqueue', PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN, {
        kind,
        payload,
        ...(queue ? { options: { queue } } : {}),
      });
      if (response.status !== 200) throw new Error(`enqueue answered ${response.status}`);
      return ((await response.json()) as { results: { id: string }[] }).results[0]?.id as string;
    },
  };
}

export interface WorkerdApp {
  dispatchFetch(
    url: string,
    init: { method: string; headers: Record<string, string>; body: string },
  ): Promise<{
    status: number;
    json(): Promise<unknown>;
  }>;
  getWorker(): Promise<unknown>;
}

/**
 * A Worker's entries as its clients and Cloudflare call them: a JSON POST, an enqueue through its
 * route (the job's id), and its `scheduled` entry as a Cron Trigger calls it.
 */
export function workerdRequests(app: () => WorkerdApp) {
  const post = (path: string, token: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    app().dispatchFetch(`http://localhost${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      body: JSON.stringify(body),
    });
  return {
    post,
    async enqueue(kind: string, payload: unknown): Promise<string> {
      const response = await post('/skiplock/enqueue', PLATFORM_SECRETS.SKIPLOCK_ENQUEUE_TOKEN, { kind, payload });
      if (response.status !== 200) throw new Error(`enqueue answered ${response.status}`);
      const { results } = (await response.json()) as { results: { id: string }[] };
      return results[0]?.id as string;
    },
    scheduler: async () =>
      (await app().getWorker()) as { scheduled(options: { cron: string }): Promise<{ outcome: string }> },
  };
}

/** Waits until the job is in one of `states` (completed or dead by default), and returns its row. */
export function settledJob(admin: pg.Pool, schema: string, id: string, states = ['completed', 'dead']) {
  return waitForOutcome(
    () => jobRow(admin, schema, id),
    (row) => row !== undefined && states.includes(row.state),
  );
}

/**
 * What every Worker fixture is checked for, on its own driver: an order placed through the app's
 * route enqueues its job in the app's transaction, queued until a Cron Trigger's tick runs it; an
 * enqueue through skiplock's route nudges the worker, which runs the job at once; a dead job
 * replayed through the replay route runs again (nudged) and fails again.
 */
export function workerdChecks(
  requests: ReturnType<typeof workerdRequests>,
  db: () => { admin: pg.Pool; schema: string },
) {
  const { post, enqueue, scheduler } = requests;
  const row = (id: string) => jobRow(db().admin, db().schema, id);
  return {
    /** Returns the Worker's scheduled entry, for more ticks. */
    async placedOrderRunsOnCronTrigger() {
      const placed = await post('/orders', undefined, { n: 21 });
      expect(placed.status).toBe(200);
      const { job } = (await placed.json()) as { job: { id: string; outcome: string } };
      expect(job.outcome).toBe('inserted');
      // Not nudged (the app's own route enqueued it): queued until the scheduler's tick.
      expect((await row(job.id))?.state).toBe('queued');
      const worker = await scheduler();
      await worker.scheduled({ cron: '* * * * *' });
      expect(await row(job.id)).toMatchObject({ state: 'completed', result: { doubled: 42 } });
      return worker;
    },
    /** An order whose transaction fails after its enqueue: neither the order nor its job stays. */
    async failedOrderWritesNothing() {
      const count = async () =>
        (await db().admin.query(`select count(*)::int as n from "${db().schema}".jobs`)).rows[0].n as number;
      const before = await count();
      const placed = await post('/orders', undefined, { n: 1, fail: true });
      expect(placed.status).toBe(500);
      expect(await count()).toBe(before);
    },
    /** The app's own route, after its batch committed, starts the worker with skiplock.nudge. */
    async placedOrderNudgedRunsAtOnce() {
      const placed = await post('/orders', undefined, { n: 4, nudge: true });
      expect(placed.status).toBe(200);
      const { job } = (await placed.json()) as { job: { id: string } };
      // No Cron Trigger fires here: only the nudge can have run it.
      expect(await settledJob(db().admin, db().schema, job.id)).toMatchObject({
        state: 'completed',
        attempt: 1,
        result: { doubled: 8 },
      });
    },
    async nudgedEnqueueRunsAtOnce() {
      // No Cron Trigger fires here (Miniflare calls `scheduled` only when a test does): only the
      // nudge can have run it, on its first attempt.
      const id = await enqueue('platform-ping', { n: 5 });
      expect(await settledJob(db().admin, db().schema, id)).toMatchObject({
        state: 'completed',
        attempt: 1,
        result: { doubled: 10 },
      });
    },
    async replayedJobRunsAgain() {
      const id = await enqueue('platform-fails', { why: 'no such customer' });
      expect(await settledJob(db().admin, db().schema, id)).toMatchObject({ state: 'dead', attempt: 1 });
      const replay = await post('/skiplock/replay', PLATFORM_SECRETS.SKIPLOCK_ADMIN_TOKEN, { ids: [id] });
      expect(replay.status).toBe(200);
      expect(((await replay.json()) as { replayed: { id: string }[] }).replayed.map((j) => j.id)).toEqual([id]);
      // It ran again (nudged) and failed again: dead once more, with both attempts' errors.
      const errors = async () => {
        const { rows } = await db().admin.query(
          `select state, jsonb_array_length(errors) as errors from "${db().schema}".jobs where id = $1`,
          [id],
        );
        return rows[0] as { state: string; errors: number };
      };
      expect(await waitForOutcome(errors, (r) => r.state === 'dead' && r.errors === 2)).toEqual({
        state: 'dead',
        errors: 2,
      });
    },
  };
}

/**
 * A kind each of whose runs takes `takesMs` of `clock` (the invocation's), and `n` jobs of it queued:
 * a backlog one invocation cannot drain alone, for fan-out.
 */
export async function queuedSlowRuns(
  t: Pick<TestContext, 'db' | 'schema'>,
  runs: { kind: string; timeoutMs: number; takesMs: number; clock: ManualClock; n: number },
) {
  const definition = defineJob({
    kind: runs.kind,
    payload: z.object({ n: z.number() }),
    timeoutMs: runs.timeoutMs,
    handler: () => {
      runs.clock.advance(runs.takesMs);
    },
  });
  await createEnqueuer({ schema: t.schema }).enqueueMany(
    t.db,
    Array.from({ length: runs.n }, (_, i) => definition.with({ n: i })),
  );
  return definition;
}
