/**
 * The `events_publish` phase of `npm run bench` (also alone: `npm run bench -- --events-only [--quick]`):
 * events published per second, one after another on one connection, each fanned out to 5
 * subscribers — skiplock's `publish` (the event, 5 jobs and 5 deliveries in ONE statement) beside
 * pg-boss 12's `publish` with 5 subscribed queues (a read of the subscriptions, then a `send` per
 * queue: 6 statements, not atomic). Statements per publish are counted at the driver.
 */
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { z } from 'zod';
import { createEnqueuer } from '../core/enqueue.js';
import { defineEvent, subscribe, syncSubscriptions } from '../core/events.js';
import { JobRegistry } from '../core/jobs.js';
import { connect } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { queryExecutor } from '../db/query-executor.js';
import { dropDatabase, freshDatabase } from './db.js';

export const SUBSCRIBERS = 5;
/** Its own database: a phase of another bench module may run on the same server. */
const DB = 'skiplock_bench_events';

export interface EventsPublishResult {
  subscribers: number;
  events: number;
  /** Events published per second (median of the repetitions). */
  per_second: { skiplock: number; 'pg-boss': number };
  /** Statements each publish sent. */
  statements_per_publish: { skiplock: number; 'pg-boss': number };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const placed = defineEvent({ name: 'order.placed', schema: z.object({ orderId: z.number(), total: z.number() }) });

/** A pool whose statements are counted: what a publish sends, seen from the client. */
function countingPool(url: string): {
  pool: pg.Pool;
  count: () => number;
  run: (text: string, values?: unknown[]) => Promise<{ rows: unknown[] }>;
} {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  let n = 0;
  return {
    pool,
    count: () => n,
    run: (text, values) => {
      n++;
      return pool.query(text, values as unknown[]);
    },
  };
}

async function skiplockRun(url: string, events: number): Promise<{ rate: number; statements: number }> {
  const db = connect({ connectionString: url, max: 1 });
  try {
    await migrate(db);
    const subscribers = Array.from({ length: SUBSCRIBERS }, (_, i) =>
      subscribe(placed, { kind: `react-${i}`, queue: `q${i}` }),
    );
    await syncSubscriptions(db, new JobRegistry(subscribers));
    const q = createEnqueuer();
    for (let i = 0; i < 50; i++) await q.publish(db, placed, { orderId: -i, total: 1 }); // warm-up
    const counted = countingPool(url);
    await q.publish(queryExecutor(counted.run), placed, { orderId: -1_000, total: 1 });
    const statements = counted.count();
    await counted.pool.end();
    const t = performance.now();
    for (let i = 0; i < events; i++) await q.publish(db, placed, { orderId: i, total: i });
    const rate = Math.round(events / ((performance.now() - t) / 1000));
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const { rows } = await check.query(`select count(*)::int as n from skiplock.jobs`);
    await check.end();
    if (rows[0].n !== (events + 51) * SUBSCRIBERS) throw new Error(`skiplock wrote ${rows[0].n} jobs`);
    return { rate, statements };
  } finally {
    await db.close();
  }
}

async function pgBossRun(url: string, events: number): Promise<{ rate: number; statements: number }> {
  const boss = new PgBoss({ connectionString: url, schedule: false, supervise: false, max: SUBSCRIBERS + 1 });
  boss.on('error', () => {});
  await boss.start();
  try {
    for (let i = 0; i < SUBSCRIBERS; i++) {
      await boss.createQueue(`q${i}`);
      await boss.subscribe('order.placed', `q${i}`);
    }
    for (let i = 0; i < 50; i++) await boss.publish('order.placed', { orderId: -i, total: 1 });
    // pg-boss's statements for one publish, counted at a database it is given (its `db` option).
    const counted = countingPool(url);
    const countedBoss = new PgBoss({ db: { executeSql: counted.run }, schedule: false, supervise: false });
    countedBoss.on('error', () => {});
    await countedBoss.start();
    const before = counted.count();
    await countedBoss.publish('order.placed', { orderId: -1_000, total: 1 });
    const statements = counted.count() - before;
    await countedBoss.stop({ graceful: false });
    await counted.pool.end();
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const t = performance.now();
    for (let i = 0; i < events; i++) await boss.publish('order.placed', { orderId: i, total: i });
    const rate = Math.round(events / ((performance.now() - t) / 1000));
    const { rows } = await check.query(`select count(*)::int as n from pgboss.job where name like 'q%'`);
    await check.end();
    if (rows[0].n !== (events + 51) * SUBSCRIBERS) throw new Error(`pg-boss wrote ${rows[0].n} jobs`);
    return { rate, statements };
  } finally {
    await boss.stop({ graceful: false });
  }
}

/** The RESULTS.md section of the phase (empty when the run has none). */
export function eventsSection(r: Record<string, unknown>): string {
  const e = r.events_publish as EventsPublishResult | undefined;
  if (!e) return '';
  const ratio = e.per_second['pg-boss'] > 0 ? (e.per_second.skiplock / e.per_second['pg-boss']).toFixed(2) : '–';
  return `## Events: publish to ${e.subscribers} subscribers

One connection publishes ${e.events.toLocaleString('en-US')} events one after another, each to ${e.subscribers} subscribers. skiplock \`publish\`: the event, ${e.subscribers} jobs and ${e.subscribers} deliveries in one statement (atomic, in the caller's transaction when given one). pg-boss \`publish\` with ${e.subscribers} subscribed queues: a read of the subscriptions, then a \`send\` per queue (not atomic). Statements counted at the client. Alone: \`npm run bench -- --events-only\`.

| | skiplock | pg-boss | skiplock ÷ pg-boss |
| --- | --- | --- | --- |
| events/s | ${e.per_second.skiplock} | ${e.per_second['pg-boss']} | ${ratio} |
| statements per publish | ${e.statements_per_publish.skiplock} | ${e.statements_per_publish['pg-boss']} | |
`;
}

/** Runs the phase: `reps` repetitions of each system, alternating, on a fresh database each. */
export async function eventsPublishPhase(options: {
  server: string;
  events: number;
  reps: number;
  log: (line: string) => void;
}): Promise<EventsPublishResult> {
  const rates: Record<'skiplock' | 'pg-boss', number[]> = { skiplock: [], 'pg-boss': [] };
  const statements = { skiplock: 0, 'pg-boss': 0 };
  for (let rep = 0; rep < options.reps; rep++) {
    const order: ('skiplock' | 'pg-boss')[] = rep % 2 === 0 ? ['skiplock', 'pg-boss'] : ['pg-boss', 'skiplock'];
    for (const name of order) {
      const url = await freshDatabase(options.server, DB);
      const run = name === 'skiplock' ? await skiplockRun(url, options.events) : await pgBossRun(url, options.events);
      rates[name].push(run.rate);
      statements[name] = run.statements;
    }
  }
  await dropDatabase(options.server, DB);
  const result: EventsPublishResult = {
    subscribers: SUBSCRIBERS,
    events: options.events,
    per_second: { skiplock: median(rates.skiplock), 'pg-boss': median(rates['pg-boss']) },
    statements_per_publish: statements,
  };
  options.log(
    `  events_publish (${SUBSCRIBERS} subscribers): ${JSON.stringify(result.per_second)} per s; statements ${JSON.stringify(statements)}`,
  );
  return result;
}
