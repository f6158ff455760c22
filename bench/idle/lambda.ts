/**
 * The simulated idle day on AWS Lambda (IDLE-DESIGN.md): the real `createLambdaWorker` and
 * `createLambdaMaintenance` handlers, one warm instance each, on a fresh schema; the local
 * EventBridge Scheduler fires their one-off wake-ups, and the fixed safety-net rules
 * (rate(6 hours)) fire at 00:00, 06:00, 12:00 and 18:00. Time is supplied: the day is stepped a
 * minute at a time from D, and the database judges the worker's claims at that time.
 *
 * What is due: a retry at 10:00 (enqueued before the day with runAt D+10h: a job whose first attempt
 * failed just before midnight with a 10-hour back-off waits exactly so), a code schedule
 * `0 18 * * *`, an enqueue at 14:00 through skiplock's enqueuer with the Lambda nudger (`nudge: true`,
 * as an app does), and an un-nudged raw-SQL insert at 20:00, which the next safety-net tick finds —
 * at 24:00, the first minute of the next day, simulated only to measure that job's lateness.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { z } from 'zod/mini';
import { createLambdaMaintenance, createLambdaWorker, type LambdaContext } from '../../adapters/lambda.js';
import { createLambdaNudger } from '../../adapters/lambda-invoke.js';
import { resetSharedRuntime } from '../../adapters/runtime.js';
import { type Clock, systemClock } from '../../core/clock.js';
import { createEnqueuer } from '../../core/enqueue.js';
import { defineJob } from '../../core/jobs.js';
import { defineSchedule } from '../../core/schedules.js';
import { connect } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { lambdaContext, scheduledEvent } from '../../testing/events.js';
import { startLocalScheduler } from '../../testing/scheduler-endpoint.js';
import { countPgTraffic, type IdleDay, type IdleHour } from './day.js';

export type { IdleDay, IdleHour } from './day.js';

/**
 * The day's first instant D: the UTC midnight after tomorrow begins — ahead of the database's clock,
 * so that what it stamps `now()` (an enqueue, the raw insert) is due in the simulated day, and within
 * the year an enqueue's runAt may be ahead.
 */
export function dayStart(wallNow = Date.now()): Date {
  return new Date((Math.floor(wallNow / 86_400_000) + 2) * 86_400_000);
}
/** The fixed rules' period: serverless.yml's rate(6 hours) = SKIPLOCK_IDLE_RECHECK_MINUTES 360. */
export const RECHECK_MS = 6 * 3_600_000;
const MINUTE = 60_000;
const HOUR = 3_600_000;
const WORKER = 'idle-day-worker';
const MAINTENANCE = 'idle-day-maintenance';
const ROLE = 'arn:aws:iam::123456789012:role/idle-day-wake';

/** A local Lambda Invoke API that runs the nudged worker and waits for it (the nudge's start). */
async function startInvokeEndpoint(handlers: Record<string, (event: unknown) => Promise<unknown>>) {
  const running = new Set<Promise<unknown>>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const name = decodeURIComponent(/functions\/([^/]+)\/invocations/.exec(req.url ?? '')?.[1] ?? '');
      res.writeHead(202).end();
      const run = handlers[name]?.(JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null'));
      if (run) {
        const settled: Promise<unknown> = run.finally(() => running.delete(settled));
        running.add(settled);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    settled: async () => {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export async function simulateDay(options: { databaseUrl: string }): Promise<IdleDay> {
  const schema = `idle_lambda_${process.pid}`;
  const admin = new pg.Client({ connectionString: options.databaseUrl });
  await admin.connect();
  await admin.query(`drop schema if exists ${schema} cascade`);
  const db = connect({ connectionString: options.databaseUrl, driver: 'pg' });
  await migrate(db, { schema });

  const DAY_START = dayStart();
  let now = DAY_START;
  const ranAt = new Map<string, Date>();
  const work = defineJob({
    kind: 'idle-day-work',
    queue: 'idle-day',
    payload: z.object({ name: z.string() }),
    timeoutMs: 5_000,
    handler: (payload) => {
      if (!ranAt.has(payload.name)) ranAt.set(payload.name, now);
    },
  });
  const schedules = [defineSchedule({ name: 'evening', cron: '0 18 * * *', job: work, payload: { name: 'schedule' } })];

  const saved = { ...process.env };
  const hours: IdleHour[] = Array.from({ length: 24 }, (_, hour) => ({
    hour,
    statements: 0,
    connections: 0,
    invocations: 0,
    due: [],
  }));
  const hourOf = (at: Date) => hours[Math.floor((at.getTime() - DAY_START.getTime()) / HOUR)];
  const due = (label: string) => {
    const hour = hourOf(now);
    if (hour && !hour.due.includes(label)) hour.due.push(label);
  };

  const env = {
    DATABASE_URL: options.databaseUrl,
    SKIPLOCK_DRIVER: 'pg',
    SKIPLOCK_SCHEMA: schema,
    SKIPLOCK_LOG_LEVEL: 'error',
    SKIPLOCK_WAKE_ROLE_ARN: ROLE,
    SKIPLOCK_MAINTENANCE_FUNCTION: MAINTENANCE,
  };
  const test = { now: () => now };
  // The instance's clock is the day's too: what it throttles per warm instance (the schedules' tick,
  // at most every 10 s) counts simulated time, as a real instance counts real time.
  const clock: Clock = { now: () => now.getTime(), setTimer: systemClock.setTimer };
  const workerHandler = createLambdaWorker([work], { env, schedules, test, clock });
  const maintenanceHandler = createLambdaMaintenance({ env, test });
  const invoke =
    (name: string, handler: (event: unknown, context: LambdaContext) => Promise<unknown>) => async (event: unknown) => {
      const hour = hourOf(now);
      if (hour) hour.invocations++;
      if (name === MAINTENANCE && (event as { reason?: string } | null)?.reason === 'wake') due('maintenance');
      return handler(event, lambdaContext(60_000, name));
    };
  const runWorker = invoke(WORKER, workerHandler);
  const runMaintenance = invoke(MAINTENANCE, maintenanceHandler);
  const scheduler = await startLocalScheduler({ [WORKER]: runWorker, [MAINTENANCE]: runMaintenance });
  const lambda = await startInvokeEndpoint({ [WORKER]: runWorker });
  Object.assign(process.env, {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'idle-day',
    AWS_SECRET_ACCESS_KEY: 'idle-day',
    AWS_ENDPOINT_URL_SCHEDULER: scheduler.url,
    AWS_ENDPOINT_URL_LAMBDA: lambda.url,
  });

  // Before the day: the retry, due at 10:00.
  const nudger = createLambdaNudger(
    { '*': WORKER },
    { coalesceMs: 0, wake: { roleArn: ROLE, now: () => now.getTime() } },
  );
  const enqueuer = createEnqueuer({ schema, nudger });
  const retryAt = new Date(DAY_START.getTime() + 10 * HOUR);
  await createEnqueuer({ schema }).enqueue(db, work, { name: 'retry' }, { runAt: retryAt });
  const dueAt: Record<string, Date> = {
    retry: retryAt,
    enqueue: new Date(DAY_START.getTime() + 14 * HOUR),
    schedule: new Date(DAY_START.getTime() + 18 * HOUR),
    'raw-insert': new Date(DAY_START.getTime() + 20 * HOUR),
  };

  const traffic = countPgTraffic(() => now.getTime());
  try {
    for (let t = DAY_START.getTime(); t <= DAY_START.getTime() + 24 * HOUR; t += MINUTE) {
      now = new Date(t);
      for (const [label, at] of Object.entries(dueAt)) if (at.getTime() === t) due(label);
      if ((t - DAY_START.getTime()) % RECHECK_MS === 0) {
        due('recheck');
        await runWorker(scheduledEvent());
        await runMaintenance(scheduledEvent());
      }
      if (t === dueAt.enqueue?.getTime()) {
        await enqueuer.enqueue(db, work, { name: 'enqueue' }, { nudge: true });
        await lambda.settled();
      }
      if (t === dueAt['raw-insert']?.getTime()) {
        await admin.query(`insert into ${schema}.jobs (kind, queue, payload) values ($1, $2, $3)`, [
          work.kind,
          work.queue,
          JSON.stringify({ name: 'raw-insert' }),
        ]);
      }
      await scheduler.fireDue(now);
    }
  } finally {
    traffic.stop();
    process.env = saved;
    await scheduler.close();
    await lambda.close();
    await resetSharedRuntime();
    await db.close();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }

  const counted = traffic.hourly(DAY_START.getTime());
  for (const hour of hours) {
    hour.statements = counted.statements[hour.hour] ?? 0;
    hour.connections = counted.connections[hour.hour] ?? 0;
  }
  return {
    hours,
    databaseActiveMinutes: traffic.activeMinutes(DAY_START.getTime()),
    jobs: Object.entries(dueAt).map(([name, at]) => {
      const ran = ranAt.get(name);
      return {
        name,
        dueAt: at.toISOString(),
        ranAt: ran?.toISOString() ?? null,
        lateMs: ran ? ran.getTime() - at.getTime() : null,
      };
    }),
  };
}
