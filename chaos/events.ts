import type pg from 'pg';
import { z } from 'zod';
import type { Enqueuer } from '../core/enqueue.js';
import { defineEvent, subscribe } from '../core/events.js';
import { connectFaulty, type FaultyConnection } from './stand-ins.js';

/**
 * Events under chaos: the harness publishes `chaos.event` through the driver under test while the
 * faults are on, each publish with its dedupe key and sent again blindly until answered (in the
 * caller's transaction on pg and neon-ws, in the caller's batch on neon-http, or on its own). Three
 * subscribers — one for every event, one filtered (`where`), one with an ordering key — are run by the
 * killed workers like any kind. The check: every publish made one event, and every event one job
 * per subscriber it matches: none missing, none twice.
 */
export const CHAOS_EVENT = defineEvent({
  name: 'chaos.event',
  schema: z.object({ n: z.number().int(), even: z.boolean(), key: z.string() }),
});

export const EVENTS_QUEUE = 'chaos-events';

/** The subscribers, as the worker processes and the drain run them (handlers do nothing: the jobs are what is checked). */
export const chaosSubscribers = [
  subscribe(CHAOS_EVENT, { kind: 'chaos-sub-all', queue: EVENTS_QUEUE, timeoutMs: 2_000, handler: () => {} }),
  subscribe(CHAOS_EVENT, {
    kind: 'chaos-sub-even',
    queue: EVENTS_QUEUE,
    timeoutMs: 2_000,
    where: { even: true },
    handler: () => {},
  }),
  subscribe(CHAOS_EVENT, {
    kind: 'chaos-sub-keyed',
    queue: EVENTS_QUEUE,
    timeoutMs: 2_000,
    orderingKey: 'key',
    handler: () => {},
  }),
];
/** The subscriber kinds, quoted for SQL: the checker leaves their jobs to checkEvents. */
export const SUBSCRIBER_KINDS = chaosSubscribers.map((s) => `'${s.kind}'`).join(', ');
const KINDS = SUBSCRIBER_KINDS;

export interface EventCounts {
  published: number;
  retries: number;
  duplicatesAnswered: number;
}

/** Publishes `total` events through the driver under test, one per `next()`; each intent recorded first. */
export function eventPublisher(options: {
  connection: FaultyConnection;
  admin: pg.Pool;
  schema: string;
  enqueuer: Enqueuer;
  total: number;
}) {
  const { admin, schema, enqueuer, connection, total } = options;
  const db = connectFaulty(connection);
  const counts: EventCounts = { published: 0, retries: 0, duplicatesAnswered: 0 };
  let n = 0;
  const publishOnce = async (payload: { n: number; even: boolean; key: string }, dedupeKey: string) => {
    const path = n % 3;
    if (path === 0 && db.interactiveTransactions) {
      return db.db.transaction(async (tx) => enqueuer.publish(tx, CHAOS_EVENT, payload, { dedupeKey }));
    }
    if (path === 0) {
      const prepared = enqueuer.preparePublish(CHAOS_EVENT, payload, { dedupeKey });
      const batching = db.db as unknown as { batch(queries: unknown[]): Promise<unknown[]> };
      const [raw] = await batching.batch(prepared.statements.map((s) => db.db.execute(s)));
      return prepared.read([raw]);
    }
    return enqueuer.publish(db, CHAOS_EVENT, payload, { dedupeKey });
  };
  return {
    counts: () => ({ ...counts }),
    /** One publish, retried blindly until answered (its dedupe key makes that safe); false when all are done. */
    async next(): Promise<boolean> {
      if (n >= total) return false;
      const payload = { n, even: n % 2 === 0, key: `ev-key-${n % 50}` };
      const dedupeKey = `chaos-ev-${n}`;
      await admin.query(`insert into "${schema}".chaos_published (n, dedupe_key, even) values ($1, $2, $3)`, [
        n,
        dedupeKey,
        payload.even,
      ]);
      for (let attempt = 1; ; attempt++) {
        try {
          const result = await publishOnce(payload, dedupeKey);
          if (result.duplicate) counts.duplicatesAnswered++;
          break;
        } catch (err) {
          if (attempt >= 200) throw new Error(`a publish failed ${attempt} times: ${(err as Error).message}`);
          counts.retries++;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      counts.published++;
      n++;
      return true;
    },
    close: () => db.close(),
  };
}

/** The table of publish intents (written before each publish is sent). */
export async function createEventTables(admin: pg.Pool, schema: string): Promise<void> {
  await admin.query(
    `create table "${schema}".chaos_published (n int primary key, dedupe_key text not null, even boolean not null)`,
  );
}

export interface EventCheck {
  published: number;
  events: number;
  subscriberJobs: number;
  /** Expected (event, subscriber) pairs with no job, or whose job is gone without completing, or not finished. */
  missing: number;
  /** Events written twice for one publish, subscriber jobs with no delivery, a subscriber's second job for an event. */
  duplicated: number;
}

/** Every publish fanned out to every subscriber it matches exactly once. */
export async function checkEvents(admin: pg.Pool, schema: string): Promise<EventCheck> {
  const s = `"${schema}"`;
  const one = async (text: string) => Number((await admin.query(text)).rows[0]?.n ?? 0);
  const deletedOnCompletion = `select a.job_id from ${s}.chaos_audit a where a.new_state = 'deleted' and a.old_state = 'running'`;
  const expected = `select p.n, p.dedupe_key, k.kind from ${s}.chaos_published p
    cross join (values ('chaos-sub-all'), ('chaos-sub-even'), ('chaos-sub-keyed')) k(kind)
    where k.kind <> 'chaos-sub-even' or p.even`;
  return {
    published: await one(`select count(*) as n from ${s}.chaos_published`),
    events: await one(`select count(*) as n from ${s}.events where name = '${CHAOS_EVENT.name}'`),
    subscriberJobs: await one(`select count(*) as n from ${s}.event_deliveries`),
    missing: await one(`
      select count(*) as n from (${expected}) x
      where not exists (
        select 1 from ${s}.events e join ${s}.event_deliveries d on d.event_id = e.id and d.subscription = x.kind
        left join ${s}.jobs j on j.id = d.job_id
        where e.name = '${CHAOS_EVENT.name}' and e.dedupe_key = x.dedupe_key
          and ((j.id is not null and j.state = 'completed') or d.job_id in (${deletedOnCompletion})))`),
    duplicated:
      (await one(`select count(*) as n from (
        select dedupe_key from ${s}.events group by name, dedupe_key having count(*) > 1) x`)) +
      (await one(`select count(*) as n from ${s}.jobs j where j.kind in (${KINDS})
        and not exists (select 1 from ${s}.event_deliveries d where d.job_id = j.id)`)) +
      (await one(`select count(*) as n from (
        select kind, payload->>'n' from ${s}.jobs where kind in (${KINDS}) group by 1, 2 having count(*) > 1) x`)),
  };
}

/** The summary's events part. */
export const eventsLine = (c: EventCheck) =>
  `events: ${c.published} published, ${c.subscriberJobs} subscriber jobs, ${c.missing} missing, ${c.duplicated} duplicated`;
