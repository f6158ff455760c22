// The simulated idle day on Vercel (Pro plan): the real worker and maintenance route handlers, driven
// by Vercel's crons (the worker every minute, maintenance every 10 minutes) on a supplied clock, with
// an in-memory hint store; every statement and new connection any pg client in the process sends is
// counted, by the hour of the simulated time it was sent at.
import { createServer, type Server } from 'node:http';
import pg from 'pg';
import { z } from 'zod';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import {
  createVercelMaintenance,
  createVercelNudger,
  createVercelWorker,
  memoryIdleHints,
  type RouteHandler,
} from '../../adapters/vercel.js';
import type { Clock } from '../../core/clock.js';
import { systemClock } from '../../core/clock.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { defineSchedule } from '../../core/schedules.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { countPgTraffic, type IdleDay, type IdleHour } from './day.js';

export type { IdleDay, IdleHour } from './day.js';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const CRON_SECRET = 'idle-day-cron-secret-0123456789';
/** The safety net: SKIPLOCK_IDLE_RECHECK_MINUTES' default (360). */
const RECHECK_MINUTES = 360;

/**
 * Simulated time that moves on by itself in real time between jumps, so that an invocation's own
 * budget and timers (the system's) still work, while every tick starts at the minute it stands for.
 */
class DayClock implements Clock {
  #base = 0;
  #anchor = performance.now();
  now(): number {
    return this.#base + (performance.now() - this.#anchor);
  }
  setTimer(fn: () => void, ms: number, options?: { keepAlive?: boolean }): () => void {
    return systemClock.setTimer(fn, ms, options);
  }
  set(at: number): void {
    this.#base = at;
    this.#anchor = performance.now();
  }
}

/** Serves the worker route over HTTP, for the nudger's requests. */
async function serve(worker: RouteHandler, onRequest: () => void): Promise<{ origin: string; server: Server }> {
  const server = createServer(async (req, res) => {
    onRequest();
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
    const response = await worker(new Request(`http://127.0.0.1${req.url}`, { headers }));
    res.writeHead(response.status, { 'content-type': 'application/json' }).end(await response.text());
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

export async function simulateDay(options: { databaseUrl: string }): Promise<IdleDay> {
  const schema = `idle_vercel_${process.pid}`;
  // The day: a UTC midnight one to two days ahead of the database's clock, so a job written "now"
  // (the enqueue's run_at) is due, and run_at stays within the enqueue's one-year bound.
  const D = Math.ceil((Date.now() + 24 * HOUR) / (24 * HOUR)) * 24 * HOUR;
  const clock = new DayClock();
  const test = { now: () => new Date(clock.now()) };
  const ranAt = new Map<string, number>();
  const work = defineJob({
    kind: 'work',
    payload: z.object({ name: z.string() }),
    timeoutMs: 5_000,
    handler: (payload) => {
      ranAt.set(payload.name, clock.now());
    },
  });
  const evening = defineSchedule({ name: 'evening', cron: '0 18 * * *', job: work, payload: { name: 'schedule' } });

  const app = connect({ connectionString: options.databaseUrl, driver: 'pg' });
  const admin = new pg.Client({ connectionString: options.databaseUrl });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  await migrate(app, { schema });
  // A job that failed just before the day began: written as a retry (attempt 1) due at 10:00.
  const enqueuer = createEnqueuer({ schema });
  const retry = await enqueuer.enqueue(app.db, work, { name: 'retry' }, { runAt: new Date(D + 10 * HOUR) });
  await admin.query(`update ${schema}.jobs set attempt = 1 where id = $1`, [retry.id]);

  const env = {
    DATABASE_URL: options.databaseUrl,
    SKIPLOCK_DRIVER: 'pg',
    SKIPLOCK_SCHEMA: schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_MAX_DURATION_MS: '60000',
    SKIPLOCK_IDLE_RECHECK_MINUTES: String(RECHECK_MINUTES),
    CRON_SECRET,
  };
  const idleHints = memoryIdleHints({ now: () => clock.now() });
  const started: Promise<unknown>[] = [];
  const waitUntil = (p: Promise<unknown>) => {
    started.push(p);
  };
  const worker = createVercelWorker([work], { env, idleHints, test, clock, schedules: [evening], waitUntil });
  const maintenance = createVercelMaintenance({ env, idleHints, test });

  const hourOf = () => Math.floor((clock.now() - D) / HOUR);
  const invocations = new Map<number, number>();
  const due = new Map<number, Set<string>>();
  const invoked = () => invocations.set(hourOf(), (invocations.get(hourOf()) ?? 0) + 1);
  const dueNow = (what: string) => due.set(hourOf(), (due.get(hourOf()) ?? new Set()).add(what));
  const { origin, server } = await serve(worker, invoked);
  const nudger = createVercelNudger(
    { '*': '/api/worker' },
    { origin, secret: CRON_SECRET, idleHints, schema, test, waitUntil },
  );
  const appEnqueuer = createEnqueuer({ schema, nudger });

  const cron = async (route: RouteHandler, path: string, what: 'worker' | 'maintenance') => {
    invoked();
    const response = await route(
      new Request(`http://127.0.0.1${path}`, { headers: { authorization: `Bearer ${CRON_SECRET}` } }),
    );
    const body = (await response.json()) as { idle?: boolean; woke?: string };
    if (body.woke === 'recheck' || body.woke === 'no-hint') dueNow('recheck');
    if (what === 'maintenance' && !body.idle) dueNow('maintenance');
  };
  const settle = async () => {
    while (started.length > 0) await Promise.all(started.splice(0));
  };

  // Deployed a while ago: the last ticks before the day left their hints.
  clock.set(D - 10 * MINUTE);
  await cron(maintenance, '/api/maintenance', 'maintenance');
  clock.set(D - MINUTE);
  await cron(worker, '/api/worker', 'worker');
  due.clear();
  invocations.clear();

  const traffic = countPgTraffic(() => clock.now());
  const events: { at: number; name: string; run: () => Promise<void> }[] = [
    {
      at: D + 14 * HOUR + 30_000,
      name: 'enqueue',
      run: async () => {
        await appEnqueuer.enqueue(app.db, work, { name: 'enqueue' }, { nudge: true });
      },
    },
    {
      at: D + 20 * HOUR + 30_000,
      name: 'raw-insert',
      run: async () => {
        await admin.query(
          `insert into ${schema}.jobs (kind, queue, payload, run_at) values ('work', 'default', $1, $2)`,
          [{ name: 'raw-insert' }, new Date(D + 20 * HOUR + 30_000)],
        );
      },
    },
  ];
  const dueAt: Record<string, number> = {
    retry: D + 10 * HOUR,
    enqueue: D + 14 * HOUR + 30_000,
    schedule: D + 18 * HOUR,
    'raw-insert': D + 20 * HOUR + 30_000,
  };
  for (const [name, at] of Object.entries(dueAt)) {
    if (at < D + 24 * HOUR)
      due.set(Math.floor((at - D) / HOUR), (due.get(Math.floor((at - D) / HOUR)) ?? new Set()).add(name));
  }
  try {
    // The day, and on past midnight until the raw insert ran (its wait is the safety net's).
    const end = D + 20 * HOUR + (RECHECK_MINUTES + 10) * MINUTE;
    for (let minute = D; minute < end && !(minute >= D + 24 * HOUR && ranAt.has('raw-insert')); minute += MINUTE) {
      clock.set(minute);
      await cron(worker, '/api/worker', 'worker');
      if ((minute - D) % (10 * MINUTE) === 0) await cron(maintenance, '/api/maintenance', 'maintenance');
      await settle();
      for (const event of events.filter((e) => e.at >= minute && e.at < minute + MINUTE)) {
        clock.set(event.at);
        await event.run();
        await settle();
      }
    }
  } finally {
    traffic.stop();
    server.close();
    await resetSharedRuntime();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
    await app.close();
  }
  const counted = traffic.hourly(D);
  const hours: IdleHour[] = Array.from({ length: 24 }, (_, hour) => ({
    hour,
    statements: counted.statements[hour] ?? 0,
    connections: counted.connections[hour] ?? 0,
    invocations: invocations.get(hour) ?? 0,
    due: [...(due.get(hour) ?? [])],
  }));
  const jobs = Object.entries(dueAt).map(([name, at]) => {
    const ran = ranAt.get(name);
    return {
      name,
      dueAt: new Date(at).toISOString(),
      ranAt: ran === undefined ? null : new Date(ran).toISOString(),
      lateMs: ran === undefined ? null : Math.max(0, Math.round(ran - at)),
    };
  });
  return { hours, jobs, databaseActiveMinutes: traffic.activeMinutes(D) };
}
