// What docs/deploy-vercel.md ("Hobby and preview deployments") promises where Vercel's crons run
// at most once a day (Hobby) or not at all (previews): the real routes on the real database, served
// over HTTP on 127.0.0.1 so that a nudge's request travels to the worker route, with work kept
// alive after a response as Next's `after` does. Time is supplied: a ManualClock for the
// invocation, the same instant as every statement's `now`, and the daily cron's tick at the
// minute HOBBY_CRONS names.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import {
  createVercelEnqueue,
  createVercelWorker,
  type IdleHintStore,
  memoryIdleHints,
  type RouteHandler,
} from '../../adapters/vercel.js';
import { RetryAfterError } from '../../base/errors.js';
import { cronMatches, parseCron } from '../../cli/cron.js';
import { HOBBY_CRONS } from '../../cli/init.js';
import { defineJob } from '../../core/jobs.js';
import { ManualClock } from '../../testing/clock.js';
import { databaseUrl, type TestContext, testDriver, useTestSchema } from '../helpers/db.js';
import { SECRETS } from '../helpers/vercel-routes.js';

let t: TestContext;
useTestSchema('functions-vercel-hobby', (ctx) => {
  t = ctx;
});
afterEach(() => resetSharedRuntime());

/** A manual clock that can say when its next timer within `ms` is due (to step to it). */
class SteppingClock extends ManualClock {
  readonly #pending = new Set<{ at: number }>();

  override setTimer(fn: () => void, ms: number): () => void {
    const timer = { at: this.now() + Math.max(0, ms) };
    this.#pending.add(timer);
    const cancel = super.setTimer(() => {
      this.#pending.delete(timer);
      fn();
    }, ms);
    return () => {
      this.#pending.delete(timer);
      cancel();
    };
  }

  /** The time of the earliest timer due within `ms` from now, if any. */
  nextWithin(ms: number): number | undefined {
    const ats = [...this.#pending].map((timer) => timer.at).filter((at) => at <= this.now() + ms);
    return ats.length > 0 ? Math.min(...ats) : undefined;
  }

  /** Moves to `at` (epoch ms), running the timers that come due. */
  to(at: number): void {
    this.advance(at - this.now());
  }
}

/**
 * Until `done` settles, moves the clock to each timer of at most `maxStepMs` (a lingering
 * invocation's next look, a flush) as soon as one is pending: a lingering invocation's wait takes
 * no wall time. Longer timers (the invocation's deadline, a job's timeout) are never reached.
 */
async function stepUntil(clock: SteppingClock, done: Promise<unknown>, maxStepMs = 250): Promise<void> {
  let finished = false;
  const ended = done.then(
    () => {
      finished = true;
    },
    () => {
      finished = true;
    },
  );
  while (!finished) {
    await new Promise<void>((resolve) => setImmediate(resolve)); // a turn of the event loop, not time
    const at = clock.nextWithin(maxStepMs);
    if (at !== undefined) clock.to(at);
  }
  await ended;
}

/** The first minute after `from` (epoch ms) at which `schedule` fires (UTC). */
function nextTick(schedule: string, from: number): number {
  const fields = parseCron(schedule);
  let minute = Math.floor(from / 60_000) * 60_000 + 60_000;
  while (!cronMatches(fields, new Date(minute))) minute += 60_000;
  return minute;
}
const [hobbyWorkerCron] = HOBBY_CRONS.filter((cron) => cron.path === '/api/worker');

interface Served {
  path: string;
  start: string | undefined;
  status: number;
}

/**
 * Serves `routes` on 127.0.0.1: a Web Request per request, the response sent as soon as the handler
 * returns. `waitUntil` is the routes' `after`: what it is given runs on; `settled()` waits for it all.
 */
function appServer() {
  const background = new Set<Promise<unknown>>();
  const waitUntil = (promise: Promise<unknown>) => {
    const tracked = promise.catch(() => {}).finally(() => background.delete(tracked));
    background.add(tracked);
  };
  const served: Served[] = [];
  let server: Server | undefined;
  return {
    waitUntil,
    served,
    async listen(routes: Record<string, RouteHandler>): Promise<string> {
      server = createServer((req: IncomingMessage, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', async () => {
          const path = new URL(req.url ?? '/', 'http://localhost').pathname;
          const handler = routes[path];
          if (!handler) {
            res.writeHead(404).end();
            return;
          }
          const headers = new Headers();
          for (const [name, value] of Object.entries(req.headers))
            if (typeof value === 'string') headers.set(name, value);
          const body = req.method === 'POST' ? new Uint8Array(Buffer.concat(chunks)) : undefined;
          const response = await handler(
            new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body }),
          );
          served.push({ path, start: req.headers['x-skiplock-start'] as string | undefined, status: response.status });
          res.writeHead(response.status, { 'content-type': 'application/json' }).end(await response.text());
        });
      });
      await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    settled: async () => {
      while (background.size > 0) await Promise.allSettled([...background]);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server?.closeAllConnections();
        server?.close(() => resolve());
      }),
  };
}

/** Each attempt, as `text#attempt` at the clock's time. */
const ran: { run: string; at: number }[] = [];
let clock: SteppingClock;
const note = defineJob({
  kind: 'note',
  queue: 'notes',
  payload: z.object({ text: z.string() }),
  timeoutMs: 5_000,
  handler: (payload, ctx) => {
    ran.push({ run: `${payload.text}#${ctx.attempt}`, at: clock.now() });
  },
});
/** Fails its first attempt with a 5 s back-off (a 429's Retry-After), then succeeds. */
const flaky = defineJob({
  kind: 'flaky',
  queue: 'notes',
  payload: z.object({ text: z.string() }),
  timeoutMs: 5_000,
  handler: (payload, ctx) => {
    ran.push({ run: `${payload.text}#${ctx.attempt}`, at: clock.now() });
    if (ctx.attempt === 1) throw new RetryAfterError(5_000, 'rate limited (429)');
  },
});

let store: IdleHintStore;
const test = { now: () => new Date(clock.now()) };
beforeEach(() => {
  // A minute ahead of the database's clock, on a whole second: a job enqueued "now" is due.
  clock = new SteppingClock(Math.ceil(Date.now() / 1000) * 1000 + 60_000);
  store = memoryIdleHints({ now: () => clock.now() });
  ran.length = 0;
});

/**
 * The app as `init vercel --plan hobby` deploys it, with the nudges set: the enqueue route and the
 * worker route (every queue) sharing one hint store; no cron request unless a test sends one.
 */
async function hobbyApp(extra: Record<string, string> = {}) {
  const env = {
    DATABASE_URL: databaseUrl(),
    SKIPLOCK_DRIVER: testDriver(),
    SKIPLOCK_SCHEMA: t.schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_NUDGE_ROUTES: '*=/api/worker',
    ...SECRETS,
    ...extra,
  };
  const server = appServer();
  const kinds = [note, flaky];
  const { waitUntil } = server;
  const worker = createVercelWorker(kinds, { env, maxDurationMs: 60_000, clock, test, idleHints: store, waitUntil });
  const origin = await server.listen({
    '/api/enqueue': createVercelEnqueue(kinds, { env, clock, idleHints: store, waitUntil }),
    '/api/worker': worker,
  });
  const enqueue = async (body: unknown) => {
    const response = await fetch(`${origin}/api/enqueue`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SECRETS.SKIPLOCK_ENQUEUE_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(200);
  };
  /** Vercel's daily cron: GET /api/worker with the bearer CRON_SECRET, answered when done. */
  const dailyTick = async () => {
    const response = await fetch(`${origin}/api/worker`, {
      headers: { authorization: `Bearer ${SECRETS.CRON_SECRET}` },
    });
    return (await response.json()) as { idle?: true; woke?: string; claimed?: number; completed?: number };
  };
  return { ...server, origin, enqueue, dailyTick };
}

const jobs = async () =>
  (
    await t.admin.query<{ kind: string; state: string; attempt: number }>(
      `select kind, state, attempt from "${t.schema}".jobs order by id`,
    )
  ).rows;

describe(`Hobby and preview deployments (${testDriver()})`, () => {
  it('with no cron at all, an enqueue through the route runs its job at once: the nudge reaches the worker route', async () => {
    const app = await hobbyApp();
    try {
      await app.enqueue({ kind: 'note', payload: { text: 'nudged' } });
      await app.settled();
    } finally {
      await app.close();
    }
    expect(app.served).toEqual([
      { path: '/api/enqueue', start: undefined, status: 200 },
      { path: '/api/worker', start: 'nudge', status: 202 },
    ]);
    expect(ran.map((r) => r.run)).toEqual(['nudged#1']);
    expect(await jobs()).toEqual([{ kind: 'note', state: 'completed', attempt: 1 }]);
  });

  it('a retry whose back-off ends within SKIPLOCK_LINGER_MS runs in the invocation that failed it', async () => {
    const app = await hobbyApp({ SKIPLOCK_LINGER_MS: '10000' });
    try {
      await app.enqueue({ kind: 'flaky', payload: { text: 'flaky' } });
      await stepUntil(clock, app.settled());
    } finally {
      await app.close();
    }
    // One worker request, the nudge's: the second attempt ran in its invocation, 5 s after the first.
    expect(app.served.filter((s) => s.path === '/api/worker')).toEqual([
      { path: '/api/worker', start: 'nudge', status: 202 },
    ]);
    expect(ran.map((r) => r.run)).toEqual(['flaky#1', 'flaky#2']);
    const waited = (ran[1]?.at ?? 0) - (ran[0]?.at ?? 0);
    expect(waited).toBeGreaterThanOrEqual(5_000);
    expect(waited).toBeLessThanOrEqual(5_000 + 250 + 250); // the next look, every 250 ms
    expect(await jobs()).toEqual([{ kind: 'flaky', state: 'completed', attempt: 2 }]);
  });

  it.each([
    ['without SKIPLOCK_LINGER_MS', {}],
    ['with a SKIPLOCK_LINGER_MS shorter than the back-off', { SKIPLOCK_LINGER_MS: '2000' }],
  ])('%s, the retry waits for the next daily tick (or nudge)', async (_, extra) => {
    const app = await hobbyApp(extra);
    try {
      await app.enqueue({ kind: 'flaky', payload: { text: 'flaky' } });
      await stepUntil(clock, app.settled());
      expect(ran.map((r) => r.run)).toEqual(['flaky#1']);
      expect(await jobs()).toEqual([{ kind: 'flaky', state: 'queued', attempt: 1 }]);
      // Nothing starts the worker when the back-off ends: Hobby's next tick is the daily cron's.
      clock.to(nextTick(hobbyWorkerCron!.schedule, clock.now()));
      const tick = app.dailyTick();
      await stepUntil(clock, tick);
      expect(await tick).toMatchObject({ claimed: 1, completed: 1 });
    } finally {
      await app.close();
    }
    expect(ran.map((r) => r.run)).toEqual(['flaky#1', 'flaky#2']);
    expect(await jobs()).toEqual([{ kind: 'flaky', state: 'completed', attempt: 2 }]);
  });

  it('a job delayed 2 h does not run on the nudges and the tick before it is due; it runs at the next daily tick', async () => {
    const app = await hobbyApp();
    try {
      // An hour before a daily tick, a job due an hour after it: its own nudge finds it not due.
      // (Hours past the start: the enqueue route marks its write with the system's time, and a mark
      // within 2 minutes of a hint would make the tick below query.)
      const firstTick = nextTick(hobbyWorkerCron!.schedule, clock.now() + 3 * 3_600_000);
      clock.to(firstTick - 3_600_000);
      const dueAt = firstTick + 3_600_000;
      await app.enqueue({
        kind: 'note',
        payload: { text: 'delayed' },
        options: { runAt: new Date(dueAt).toISOString() },
      });
      await app.settled();
      expect(ran).toEqual([]);

      // The daily tick before it is due answers from the hint the nudged invocation left.
      clock.to(firstTick);
      expect(await app.dailyTick()).toMatchObject({ idle: true, wakeAt: new Date(dueAt).toISOString() });

      // Another enqueue's nudge runs that job only.
      clock.to(firstTick + 1_800_000);
      await app.enqueue({ kind: 'note', payload: { text: 'other' } });
      await app.settled();
      expect(ran.map((r) => r.run)).toEqual(['other#1']);

      // Its due time passes with no request at all; the next daily tick runs it.
      const nextDay = nextTick(hobbyWorkerCron!.schedule, dueAt);
      expect(nextDay - firstTick).toBe(86_400_000);
      clock.to(nextDay);
      const tick = await app.dailyTick();
      expect(tick.idle).toBeUndefined();
      expect(tick).toMatchObject({ claimed: 1, completed: 1 });
    } finally {
      await app.close();
    }
    expect(ran.map((r) => r.run)).toEqual(['other#1', 'delayed#1']);
    expect(app.served.filter((s) => s.path === '/api/worker').map((s) => s.start ?? 'cron')).toEqual([
      'nudge',
      'cron',
      'nudge',
      'cron',
    ]);
  });
});
