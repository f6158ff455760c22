// Idle cron ticks on Vercel: the real route handlers on the real database, a supplied time, and
// every statement and connection the routes' driver sends counted.
import { Client as NeonClient } from '@neondatabase/serverless';
import { getCache } from '@vercel/functions';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import {
  createVercelConsole,
  createVercelEnqueue,
  createVercelMaintenance,
  createVercelNudger,
  createVercelWorker,
  type IdleHintStore,
  memoryIdleHints,
  START_HEADER,
  vercelRuntimeCache,
} from '../../adapters/vercel.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { startRuntimeCacheEndpoint } from '../helpers/runtime-cache-endpoint.js';
import { captureStatements } from '../helpers/statements.js';
import { captureStdout } from '../helpers/stdout.js';
import { SECRETS } from '../helpers/vercel-routes.js';

let t: TestContext;
useTestSchema('functions-vercel-idle', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

const ran: string[] = [];
const note = defineJob({
  kind: 'note',
  queue: 'notes',
  payload: z.object({ text: z.string() }),
  timeoutMs: 1_000,
  handler: (payload) => {
    ran.push(payload.text);
  },
});

/** The test's time: a minute ahead of the database's clock, so a job enqueued "now" is due. */
let current = new Date();
const test = { now: () => current };
const minutes = (n: number) => {
  current = new Date(current.getTime() + n * 60_000);
};
let store: IdleHintStore;
beforeEach(() => {
  current = new Date(Math.ceil(Date.now() / 1000) * 1000 + 60_000);
  store = memoryIdleHints({ now: () => current.getTime() });
  ran.length = 0;
});

/** A fresh environment object each call: a fresh runtime, whose pool does not exist until used. */
const env = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: databaseUrl(),
  SKIPLOCK_DRIVER: testDriver(),
  SKIPLOCK_SCHEMA: t.schema,
  SKIPLOCK_LOG_LEVEL: 'warn',
  SKIPLOCK_MAX_DURATION_MS: '10000',
  SKIPLOCK_IDLE_RECHECK_MINUTES: '60',
  ...SECRETS,
  ...extra,
});
const cron = (path = '/api/worker', headers: Record<string, string> = {}) =>
  new Request(`https://app.example.com${path}`, {
    headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}`, ...headers },
  });
const worker = (extra: Parameters<typeof env>[0] = {}) =>
  createVercelWorker([note], { env: env(extra), idleHints: store, test });
type TickBody = { idle?: true; wakeAt?: string; woke?: string; claimed?: number; completed?: number };

/** Connections opened by the driver under test while `fn` runs (Neon's HTTP driver opens none). */
async function countConnections<T>(fn: () => Promise<T>): Promise<{ result: T; connections: number }> {
  const proto = (testDriver() === 'neon-ws' ? NeonClient.prototype : pg.Client.prototype) as {
    connect: (...args: unknown[]) => unknown;
  };
  const original = proto.connect;
  let connections = 0;
  proto.connect = function (this: unknown, ...args: unknown[]) {
    connections++;
    return original.apply(this, args);
  };
  try {
    return { result: await fn(), connections };
  } finally {
    proto.connect = original;
  }
}

/** A route call with its statements and new connections counted. */
async function measured(call: () => Promise<Response>) {
  const counted = await countConnections(() => captureStatements(testDriver(), call));
  const response = counted.result.result;
  return {
    status: response.status,
    body: (await response.json()) as TickBody,
    statements: counted.result.texts.length,
    connections: counted.connections,
  };
}

const enqueueNote = (text: string, runAt?: Date) =>
  createEnqueuer({ schema: t.schema }).enqueue(t.db.db, note, { text }, runAt ? { runAt } : {});

/**
 * An idle tick (a hint with nothing due), a minute, then an enqueuer whose Vercel nudger marks this
 * test's hint store (it starts no route: none is named).
 */
async function afterAnIdleTick() {
  await worker()(cron());
  minutes(1);
  const nudger = createVercelNudger(
    {},
    { origin: 'https://app.example.com', secret: SECRETS.CRON_SECRET, idleHints: store, schema: t.schema, test },
  );
  return createEnqueuer({ schema: t.schema, nudger });
}

describe(`Vercel idle ticks (${testDriver()})`, () => {
  it('a tick after an idle one answers from the hint: no statement, no connection', async () => {
    const first = await measured(() => worker()(cron()));
    expect(first.body.woke).toBe('no-hint');
    expect(first.statements).toBe(2); // its sweep and the next-due read: the cost of a tick that wakes for nothing
    minutes(1);
    const second = await measured(() => worker()(cron()));
    expect(second.status).toBe(200);
    expect(second.body.idle).toBe(true);
    expect(second.statements).toBe(0);
    expect(second.connections).toBe(0);
  });

  it('with SKIPLOCK_MAX_INVOCATIONS a tick that wakes for nothing takes no slot: two statements', async () => {
    const tick = await measured(() => worker({ SKIPLOCK_MAX_INVOCATIONS: '4' })(cron()));
    expect(tick.body.woke).toBe('no-hint');
    expect(tick.body.claimed ?? 0).toBe(0);
    expect(tick.statements).toBe(2); // its sweep and the next-due read; no registration to undo
  });

  it('a job due later wakes the tick at its run_at, not before; it runs then', async () => {
    await enqueueNote('later', new Date(current.getTime() + 30 * 60_000));
    await worker()(cron());
    minutes(10);
    const early = await measured(() => worker()(cron()));
    expect(early.body.idle).toBe(true);
    expect(new Date(early.body.wakeAt as string).getTime()).toBe(current.getTime() + 20 * 60_000);
    minutes(21);
    const due = await measured(() => worker()(cron()));
    expect(due.body.woke).toBe('due');
    expect(ran).toEqual(['later']);
  });

  it('an enqueue through the nudger in a transaction that commits after a racing tick runs on the next tick', async () => {
    const enqueuer = await afterAnIdleTick();
    const client = await t.admin.connect();
    let racing: TickBody | undefined;
    try {
      await drizzle({ client }).transaction(async (tx) => {
        await enqueuer.enqueue(tx, note, { text: 'in a transaction' });
        // Marked written before the commit: the racing tick queries, finds nothing yet (uncommitted).
        racing = (await (await worker()(cron())).json()) as TickBody;
      });
    } finally {
      client.release();
    }
    expect(racing).toMatchObject({ woke: 'touched', claimed: 0 });
    minutes(1);
    const next = await measured(() => worker()(cron()));
    expect(next.body.woke).toBe('touched');
    expect(ran).toEqual(['in a transaction']);
  });

  it("a neon-http batch of prepareEnqueue is marked by the enqueuer's nudge(): the next tick runs it", async () => {
    const enqueuer = await afterAnIdleTick();
    // The batch's statements, run in one transaction as neon-http's db.batch runs them.
    const pending = enqueuer.prepareEnqueue([note.with({ text: 'in a batch' })]);
    const db = drizzle({ client: t.admin });
    const raw = await db.transaction(async (tx) => Promise.all(pending.statements.map((s) => tx.execute(s))));
    expect(pending.read(raw)).toEqual([{ id: expect.any(String), outcome: 'inserted' }]);
    // A batch writes nothing but its statements: until the nudge, the hint still says idle.
    expect((await measured(() => worker()(cron()))).body.idle).toBe(true);
    await enqueuer.nudge([note.queue]);
    minutes(1);
    const next = await measured(() => worker()(cron()));
    expect(next.body.woke).toBe('touched');
    expect(ran).toEqual(['in a batch']);
  });

  it('a tick that did work leaves no skip window: the next tick queries', async () => {
    await enqueueNote('now');
    const busy = (await (await worker()(cron())).json()) as TickBody;
    expect(busy.completed).toBe(1);
    minutes(1);
    const next = await measured(() => worker()(cron()));
    expect(next.body.idle).toBeUndefined();
    expect(next.statements).toBeGreaterThan(0);
  });

  it('after SKIPLOCK_IDLE_RECHECK_MINUTES a tick queries anyway, and finds a job written with raw SQL', async () => {
    await worker()(cron());
    await t.admin.query(`insert into "${t.schema}".jobs (kind, queue, payload) values ('note', 'notes', $1)`, [
      { text: 'raw' },
    ]);
    minutes(59);
    expect((await measured(() => worker()(cron()))).body.idle).toBe(true);
    expect(ran).toEqual([]);
    minutes(1);
    const recheck = await measured(() => worker()(cron()));
    expect(recheck.body.woke).toBe('recheck');
    expect(ran).toEqual(['raw']);
  });

  it('a started request (a nudge) queries despite a valid hint, and rewrites the hint', async () => {
    await worker()(cron());
    await enqueueNote('nudged');
    minutes(1);
    const started: Promise<unknown>[] = [];
    const route = createVercelWorker([note], {
      env: env(),
      idleHints: store,
      test,
      waitUntil: (p) => started.push(p),
    });
    const response = await route(cron('/api/worker', { [START_HEADER]: 'nudge' }));
    expect(response.status).toBe(202);
    await Promise.all(started);
    expect(ran).toEqual(['nudged']);
    minutes(1);
    expect((await measured(() => worker()(cron()))).body.idle).toBeUndefined(); // it did work
  });

  it('a store that throws: every tick queries the database, one log line', async () => {
    const failing: IdleHintStore = {
      get: () => Promise.reject(new Error('cache down')),
      set: () => Promise.reject(new Error('cache down')),
    };
    const route = createVercelWorker([note], { env: env(), idleHints: failing, test });
    const { result, lines } = await captureStdout(async () => {
      const bodies: TickBody[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await route(cron());
        expect(response.status).toBe(200);
        bodies.push((await response.json()) as TickBody);
        minutes(1);
      }
      return bodies;
    });
    expect(result.map((b) => b.woke)).toEqual(['hints-failed', 'hints-failed', 'hints-failed']);
    const logged = lines.filter((line) => line.includes('idle_hints_failed'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(/cache down/);
  });

  it('SKIPLOCK_IDLE=false: every tick queries the database as before, and reads no hint', async () => {
    let reads = 0;
    const counting: IdleHintStore = {
      get: async (key) => {
        reads++;
        return store.get(key);
      },
      set: (key, value, ttl) => store.set(key, value, ttl),
    };
    const route = createVercelWorker([note], { env: env({ SKIPLOCK_IDLE: 'false' }), idleHints: counting, test });
    for (let i = 0; i < 3; i++) {
      const tick = await measured(() => route(cron()));
      expect(tick.body.idle).toBeUndefined();
      expect(tick.body.woke).toBeUndefined();
      expect(tick.statements).toBeGreaterThan(0);
      minutes(1);
    }
    expect(reads).toBe(0);
  });

  it('maintenance: a quiet tick lets the next ones skip; a worker that did work makes it due', async () => {
    const maintenance = () => createVercelMaintenance({ env: env(), idleHints: store, test });
    const first = await measured(() => maintenance()(cron('/api/maintenance')));
    expect(first.body).toMatchObject({ quiet: true, woke: 'no-hint' });
    minutes(10);
    const skipped = await measured(() => maintenance()(cron('/api/maintenance')));
    expect(skipped.body.idle).toBe(true);
    expect(skipped.statements + skipped.connections).toBe(0);
    await enqueueNote('work');
    await worker()(cron()); // did work: marks the schema
    minutes(10);
    const due = await measured(() => maintenance()(cron('/api/maintenance')));
    expect(due.body.woke).toBe('touched');
    expect(due.statements).toBeGreaterThan(0);
  });

  it('the enqueue route marks the schema written: the next tick queries and runs the job', async () => {
    await worker()(cron());
    minutes(1);
    const enqueue = createVercelEnqueue([note], { env: env(), idleHints: store });
    const response = await enqueue(
      new Request('https://app.example.com/api/enqueue', {
        method: 'POST',
        headers: { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'note', payload: { text: 'posted' } }),
      }),
    );
    expect(response.status).toBe(200);
    // The route stamps its mark with the system's time, behind the test's by a minute: still within the grace.
    const next = await measured(() => worker()(cron()));
    expect(next.body.woke).toBe('touched');
    expect(ran).toEqual(['posted']);
  });

  it('a console POST (an action; here even a refused login) marks the schema written: the next tick queries', async () => {
    // A dead job, as the DLQ holds one, while the worker sits idle on its hint.
    await t.admin.query(
      `insert into "${t.schema}".jobs (kind, queue, payload, state, dead_reason, finished_at, attempt)
       values ('note', 'notes', '{"text":"replayed"}', 'dead', 'max_attempts', now(), 3)`,
    );
    await worker()(cron());
    minutes(1);
    expect((await measured(() => worker()(cron()))).body.idle).toBe(true);
    // The job made runnable by SQL, as the console's replay statement does: the hint alone would hold
    // until the recheck. Every console POST marks the schema first, whatever the action.
    await t.admin.query(
      `update "${t.schema}".jobs set state = 'queued', dead_reason = null, finished_at = null, run_at = now() - interval '1 minute'`,
    );
    const console = createVercelConsole([note], { env: env(), idleHints: store });
    const login = await console(
      new Request('https://app.example.com/admin/login', {
        method: 'POST',
        headers: { origin: 'https://app.example.com', 'content-type': 'application/x-www-form-urlencoded' },
        body: 'token=not-the-admin-token',
      }),
    );
    expect(login.status).toBeLessThan(500);
    minutes(1);
    const next = await measured(() => worker()(cron()));
    expect(next.body.woke).toBe('touched');
    expect(ran).toEqual(['replayed']);
  });
});

describe(`Vercel idle ticks on the Runtime Cache of @vercel/functions (${testDriver()})`, () => {
  const headers = { authorization: 'Bearer runtime-cache-token' };
  let cache: Awaited<ReturnType<typeof startRuntimeCacheEndpoint>>;
  beforeAll(async () => {
    cache = await startRuntimeCacheEndpoint(headers);
    // getCache() reads these from the process's environment; the routes see them in theirs.
    process.env.RUNTIME_CACHE_ENDPOINT = cache.endpoint;
    process.env.RUNTIME_CACHE_HEADERS = JSON.stringify(headers);
  });
  afterAll(async () => {
    delete process.env.RUNTIME_CACHE_ENDPOINT;
    delete process.env.RUNTIME_CACHE_HEADERS;
    await cache.close();
  });

  it('by default on the real getCache(): a hint written, an idle tick with no statement, an enqueue that wakes it', async () => {
    const onVercel = env({ RUNTIME_CACHE_ENDPOINT: cache.endpoint });
    const route = createVercelWorker([note], { env: onVercel, test });
    expect(((await (await route(cron())).json()) as TickBody).woke).toBe('no-hint');
    const written = cache.requests.find((r) => r.method === 'POST');
    expect(written?.key).toMatch(/^skiplock\$[0-9a-f]+$/); // getCache's namespace and hashed key
    expect(Number(written?.ttl)).toBeGreaterThanOrEqual(3600); // the recheck, in seconds
    minutes(1);
    const idle = await measured(() => route(cron()));
    expect(idle.body.idle).toBe(true);
    expect(idle.statements + idle.connections).toBe(0);

    const enqueue = createVercelEnqueue([note], { env: onVercel });
    const response = await enqueue(
      new Request('https://app.example.com/api/enqueue', {
        method: 'POST',
        headers: { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'note', payload: { text: 'cached' } }),
      }),
    );
    expect(response.status).toBe(200);
    minutes(1);
    const woken = await measured(() => route(cron()));
    expect(woken.body.woke).toBe('touched');
    expect(ran).toEqual(['cached']);
  });

  it('as the Next.js template makes it (getCache imported and passed): the same namespace, an idle tick with no statement', async () => {
    const onVercel = env({ RUNTIME_CACHE_ENDPOINT: cache.endpoint });
    const idleHints = vercelRuntimeCache({ getCache, env: onVercel });
    const route = createVercelWorker([note], { env: onVercel, idleHints, test });
    // Past the grace of the marks the test before left at this endpoint (its worker did work).
    minutes(10);
    const before = cache.requests.length;
    expect(((await (await route(cron())).json()) as TickBody).claimed).toBe(0);
    const written = cache.requests.slice(before).find((r) => r.method === 'POST');
    expect(written?.key).toMatch(/^skiplock\$[0-9a-f]+$/);
    minutes(1);
    const idle = await measured(() => route(cron()));
    expect(idle.body).toMatchObject({ idle: true });
    expect(idle.statements + idle.connections).toBe(0);
  });

  it('off Vercel (no VERCEL=1, no RUNTIME_CACHE_ENDPOINT) there is no default store: every tick queries', async () => {
    const route = createVercelWorker([note], { env: env(), test });
    for (let i = 0; i < 2; i++) {
      const tick = await measured(() => route(cron()));
      expect(tick.body.idle).toBeUndefined();
      expect(tick.statements).toBeGreaterThan(0);
      minutes(1);
    }
  });
});
