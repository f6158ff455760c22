import { type SQL, sql } from 'drizzle-orm';
import { queryRows } from '../execute.js';
import type { Executor } from '../executor.js';
import { epochMs, jobsRef, nowExpr, toDate } from './common.js';
import { insertJobsParts } from './enqueue.js';

/** A subscription as code declares it (`subscribe`), in the columns of `subscriptions`. */
export interface SubscriptionSpec {
  kind: string;
  event: string;
  /** jsonb containment filter on the event's payload, or null: every event. */
  where: Record<string, unknown> | null;
  queue: string;
  priority: number;
  maxAttempts: number;
  /** Each job's deadline, this long after it was written. */
  deadlineMs: number | null;
  /** Payload paths of the job's keys (`#>>`), or null. */
  orderingPath: string[] | null;
  orderingHold: boolean;
  concurrencyPath: string[] | null;
  destinationPath: string[] | null;
}

/** A subscription as the database holds it. */
export interface SubscriptionRecord extends SubscriptionSpec {
  createdAt: Date;
  updatedAt: Date;
  activeSince: Date;
  retiredAt: Date | null;
}

const ref = (schema: string, table: string) => sql`${sql.identifier(schema)}.${sql.identifier(table)}`;

/**
 * The columns of `subscriptions` as a recordset of `specs` (one JSON parameter): what the upsert of
 * subscriptions (SubscriptionSync) reads, in a statement of its own or as a CTE of the worker's sweep.
 */
function specsRecordset(specs: readonly SubscriptionSpec[]): SQL {
  const json = JSON.stringify(
    specs.map((s) => ({
      kind: s.kind,
      event: s.event,
      where_json: s.where,
      queue: s.queue,
      priority: s.priority,
      max_attempts: s.maxAttempts,
      deadline_ms: s.deadlineMs,
      ordering_path: s.orderingPath,
      ordering_hold: s.orderingHold,
      concurrency_path: s.concurrencyPath,
      destination_path: s.destinationPath,
    })),
  );
  return sql`jsonb_to_recordset(${json}::text::jsonb) as d(kind text, event text, where_json jsonb, queue text,
    priority smallint, max_attempts int, deadline_ms bigint, ordering_path text[], ordering_hold boolean,
    concurrency_path text[], destination_path text[])`;
}

/**
 * The upsert of subscriptions (SubscriptionSync), as a CTE named `name` returning the kinds it wrote.
 * An unchanged active subscription writes nothing (no new row version, no WAL); a changed one is
 * updated in place; a retired one, or one moved to another event, becomes active again from now
 * (`active_since`, from which a reconcile fills in what concurrent publishes missed).
 */
export function syncSubscriptionsCte(schema: string, name: string, specs: readonly SubscriptionSpec[], now: SQL): SQL {
  return sql`${sql.identifier(name)} as (
    insert into ${ref(schema, 'subscriptions')} as s (kind, event, where_json, queue, priority, max_attempts,
      deadline_ms, ordering_path, ordering_hold, concurrency_path, destination_path, created_at, updated_at, active_since)
    select d.kind, d.event, d.where_json, d.queue, d.priority, d.max_attempts, d.deadline_ms, d.ordering_path,
      coalesce(d.ordering_hold, false), d.concurrency_path, d.destination_path, ${now}, ${now}, ${now}
    from ${specsRecordset(specs)}
    on conflict (kind) do update set
      event = excluded.event, where_json = excluded.where_json, queue = excluded.queue, priority = excluded.priority,
      max_attempts = excluded.max_attempts, deadline_ms = excluded.deadline_ms, ordering_path = excluded.ordering_path,
      ordering_hold = excluded.ordering_hold, concurrency_path = excluded.concurrency_path,
      destination_path = excluded.destination_path, updated_at = excluded.updated_at,
      active_since = case when s.retired_at is not null or s.event <> excluded.event
        then excluded.active_since else s.active_since end,
      retired_at = null
    where (s.event, s.where_json, s.queue, s.priority, s.max_attempts, s.deadline_ms, s.ordering_path, s.ordering_hold,
        s.concurrency_path, s.destination_path, s.retired_at)
      is distinct from (excluded.event, excluded.where_json, excluded.queue, excluded.priority, excluded.max_attempts,
        excluded.deadline_ms, excluded.ordering_path, excluded.ordering_hold, excluded.concurrency_path,
        excluded.destination_path, null::timestamptz)
    returning s.kind
  )`;
}

/** Writes `specs` (SubscriptionSync); returns the kinds it inserted or changed. */
export async function syncSubscriptions(
  db: Executor,
  schema: string,
  specs: readonly SubscriptionSpec[],
  now?: Date,
): Promise<string[]> {
  if (specs.length === 0) return [];
  const rows = await queryRows<{ kind: string }>(
    db,
    sql`with ${syncSubscriptionsCte(schema, 'synced', specs, nowExpr(now))} select kind from synced order by kind`,
    schema,
  );
  return rows.map((r) => r.kind);
}

/**
 * Retires subscriptions (SubscriptionRetire): the named kinds, or every active one not in `except`.
 * The row stays, with `retired_at`; publishes stop writing its jobs. Returns the kinds retired.
 */
export async function retireSubscriptions(
  db: Executor,
  schema: string,
  which: { kinds: readonly string[] } | { except: readonly string[] },
  now?: Date,
): Promise<string[]> {
  const match =
    'kinds' in which
      ? sql`kind = any(${sql.param([...which.kinds])}::text[])`
      : sql`not (kind = any(${sql.param([...which.except])}::text[]))`;
  const rows = await queryRows<{ kind: string }>(
    db,
    sql`update ${ref(schema, 'subscriptions')} set retired_at = ${nowExpr(now)}, updated_at = ${nowExpr(now)}
      where retired_at is null and ${match} returning kind`,
    schema,
  );
  return rows.map((r) => r.kind).sort();
}

type SubscriptionRow = {
  kind: string;
  event: string;
  where_json: Record<string, unknown> | null;
  queue: string;
  priority: number;
  max_attempts: number;
  deadline_ms: string | number | null;
  ordering_path: string[] | null;
  ordering_hold: boolean;
  concurrency_path: string[] | null;
  destination_path: string[] | null;
  created_ms: number;
  updated_ms: number;
  active_ms: number;
  retired_ms: number | null;
};

/** Every subscription, active and retired, by event and kind (SubscriptionList). */
export async function listSubscriptions(db: Executor, schema: string): Promise<SubscriptionRecord[]> {
  const rows = await queryRows<SubscriptionRow>(
    db,
    sql`select kind, event, where_json, queue, priority, max_attempts, deadline_ms, ordering_path, ordering_hold,
        concurrency_path, destination_path, ${epochMs(sql`created_at`)} as created_ms,
        ${epochMs(sql`updated_at`)} as updated_ms, ${epochMs(sql`active_since`)} as active_ms,
        ${epochMs(sql`retired_at`)} as retired_ms
      from ${ref(schema, 'subscriptions')} order by event, kind`,
    schema,
  );
  return rows.map((r) => ({
    kind: r.kind,
    event: r.event,
    where: r.where_json,
    queue: r.queue,
    priority: r.priority,
    maxAttempts: r.max_attempts,
    deadlineMs: r.deadline_ms === null ? null : Number(r.deadline_ms),
    orderingPath: r.ordering_path,
    orderingHold: r.ordering_hold,
    concurrencyPath: r.concurrency_path,
    destinationPath: r.destination_path,
    createdAt: toDate(r.created_ms) as Date,
    updatedAt: toDate(r.updated_ms) as Date,
    activeSince: toDate(r.active_ms) as Date,
    retiredAt: toDate(r.retired_ms),
  }));
}

/** A key of a subscriber's job: the text at the subscription's payload path, at most 255 characters. */
const keyAt = (path: string) => sql.raw(`nullif(left(p.payload #>> p.${path}, 255), '')`);

/**
 * The CTEs that turn `pairs` — one row per event and subscription to deliver it to, with the
 * event's id and payload and the subscription's columns — into jobs: `sub_rows` (the insert's
 * input rows, by event then kind), `claimed` (the deliveries written first, ON CONFLICT DO NOTHING:
 * a pair another statement delivered meanwhile is skipped here, so its job is not written twice),
 * then the jobs of the claimed pairs (insertJobsParts, the same insert as enqueue). Returns the CTEs
 * and the outcomes select (ord, id, inserted).
 */
function deliverCtes(schema: string, traceContext: Record<string, string> | null): { ctes: SQL; results: SQL } {
  const parts = insertJobsParts(schema, [], undefined, {
    from: 'sub_rows',
    keyed: true,
    concurrencyKeyed: true,
    destined: true,
    traced: traceContext !== null,
    claim: {
      ctes: sql`claimed as (
        insert into ${ref(schema, 'event_deliveries')} (event_id, subscription, job_id, delivered_at)
        select i.event_id, i.kind, i.id, clock_timestamp() from input i
        on conflict do nothing
        returning job_id
      )`,
      condition: (alias) => sql`${sql.identifier(alias)}.id in (select job_id from claimed)`,
    },
  });
  const ctes = sql`sub_rows as (
      select (row_number() over (order by p.event_id, p.kind) - 1)::int as ord, p.event_id, p.kind, p.queue,
        p.payload, p.priority, null::timestamptz as run_at, null::bigint as delay_ms, p.max_attempts,
        case when p.deadline_ms is not null then clock_timestamp() + p.deadline_ms * interval '1 millisecond' end as deadline,
        null::text as dedupe_key, null::text as dedupe_mode, null::bigint as window_ms, null::text as correlation_id,
        ${keyAt('ordering_path')} as ordering_key, p.ordering_hold,
        ${keyAt('concurrency_path')} as concurrency_key, ${keyAt('destination_path')} as destination
        ${traceContext ? sql`, ${JSON.stringify(traceContext)}::text::jsonb as trace_context` : sql``}
      from pairs p
    ), ${parts.ctes}`;
  return { ctes, results: parts.results };
}

/** A subscription matches an event's payload: no filter, or the payload contains it. */
const matches = (event: string, sub: string) =>
  sql.raw(`(${sub}.where_json is null or ${event}.payload @> ${sub}.where_json)`);

export interface PublishRow {
  event_id: string | null;
  inserted: boolean | null;
  subscribers: number | null;
  job_id: string | null;
  kind: string | null;
  queue: string | null;
}

/**
 * Publishes an event (EventPublish) in ONE statement, in the caller's transaction when there is one:
 * the event's row (ON CONFLICT DO NOTHING on its name and dedupe key: a retried publish writes
 * nothing), the active subscriptions of its name whose filter its payload matches — read by this
 * statement, since the publisher does not import its subscribers —, one job per subscription with
 * the subscription's options and keys, and a delivery per job. A statement that found the dedupe key
 * taken returns that event's id when it could see it (else null, the caller reads it again).
 * Rows: one per job, or one with null job_id when there is none.
 */
export function publishEventStatement(
  schema: string,
  event: {
    name: string;
    payloadJson: string;
    dedupeKey: string | null;
    traceContext: Record<string, string> | null;
    now?: Date;
  },
): SQL {
  const { ctes, results } = deliverCtes(schema, event.traceContext);
  return sql`with subs as (
      select s.* from ${ref(schema, 'subscriptions')} s where s.event = ${event.name} and s.retired_at is null
    ),
    ev as (
      insert into ${ref(schema, 'events')} (name, payload, dedupe_key, published_at, subscribers)
      values (${event.name}, ${event.payloadJson}::text::jsonb, ${event.dedupeKey}, ${nowExpr(event.now)},
        (select count(*) from subs))
      on conflict (name, dedupe_key) do nothing
      returning id, payload, subscribers
    ),
    pairs as (
      select ev.id as event_id, ev.payload, s.* from ev cross join subs s where ${matches('ev', 's')}
    ),
    ${ctes},
    outcomes as (${results})
    select e.event_id, e.inserted, e.subscribers, o.id as job_id, i.kind, i.queue
    from (
      select coalesce(ev.id, x.id)::text as event_id, ev.id is not null as inserted,
        coalesce(ev.subscribers, x.subscribers) as subscribers
      from (select 1) one
      left join ev on true
      left join ${ref(schema, 'events')} x on ev.id is null and x.name = ${event.name} and x.dedupe_key = ${event.dedupeKey}
    ) e
    left join (outcomes o join input i on i.ord = o.ord) on true
    order by o.ord`;
}

/** The event holding `name` and `dedupeKey`, for a publish whose statement could not see it yet. */
export async function findEventByDedupeKey(
  db: Executor,
  schema: string,
  name: string,
  dedupeKey: string,
): Promise<{ id: string; subscribers: number } | null> {
  const rows = await queryRows<{ id: string; subscribers: number }>(
    db,
    sql`select id::text as id, subscribers from ${ref(schema, 'events')} where name = ${name} and dedupe_key = ${dedupeKey}`,
    schema,
  );
  return rows[0] ?? null;
}

/** What a replay or a reconcile wrote: one entry per job. */
export interface Delivered {
  eventId: string;
  kind: string;
  queue: string;
  jobId: string;
}

async function deliver(db: Executor, schema: string, pairs: SQL): Promise<Delivered[]> {
  const { ctes, results } = deliverCtes(schema, null);
  const rows = await queryRows<{ event_id: string; kind: string; queue: string; job_id: string }>(
    db,
    sql`with pairs as (${pairs}), ${ctes}, outcomes as (${results})
      select i.event_id::text as event_id, i.kind, i.queue, o.id as job_id
      from outcomes o join input i on i.ord = o.ord order by o.ord`,
    schema,
  );
  return rows.map((r) => ({ eventId: r.event_id, kind: r.kind, queue: r.queue, jobId: r.job_id }));
}

/**
 * Delivers to one active subscription the events of its name published in [from, to) that it has
 * no delivery for and whose payload its filter matches (EventReplay), oldest first, at most `limit`:
 * a job each, and its delivery. Idempotent: a second replay, or one beside a reconcile, writes
 * nothing twice (the deliveries' key).
 */
export async function replayEvents(
  db: Executor,
  schema: string,
  request: { subscription: string; from: Date; to: Date; limit: number },
): Promise<Delivered[]> {
  return deliver(
    db,
    schema,
    sql`select e.id as event_id, e.payload, s.*
      from ${ref(schema, 'subscriptions')} s
      join ${ref(schema, 'events')} e on e.name = s.event
      where s.kind = ${request.subscription} and s.retired_at is null
        and e.published_at >= ${request.from.toISOString()}::timestamptz
        and e.published_at < ${request.to.toISOString()}::timestamptz
        and ${matches('e', 's')}
        and not exists (select 1 from ${ref(schema, 'event_deliveries')} d where d.event_id = e.id and d.subscription = s.kind)
      order by e.id
      limit ${request.limit}`,
  );
}

/**
 * Fills in the deliveries a concurrent publish could not make (EventReconcile): a publish whose
 * snapshot was taken before a new subscription committed did not see it. For each subscription that
 * became active within `horizonMs`, the events of its name published within `marginMs` either side of
 * that moment (a publishing transaction open at most that long) that it has no delivery for and
 * whose payload its filter matches, at most `limit`: a job each. Bounded by the margin, not by how
 * many events were published since: later publishes saw the subscription.
 */
export async function reconcileDeliveries(
  db: Executor,
  schema: string,
  request: { marginMs: number; horizonMs: number; limit: number; now?: Date },
): Promise<Delivered[]> {
  const now = nowExpr(request.now);
  return deliver(
    db,
    schema,
    sql`select e.id as event_id, e.payload, s.*
      from ${ref(schema, 'subscriptions')} s
      join ${ref(schema, 'events')} e on e.name = s.event
        and e.published_at >= s.active_since - ${request.marginMs} * interval '1 millisecond'
        and e.published_at < s.active_since + ${request.marginMs} * interval '1 millisecond'
      where s.retired_at is null and s.active_since >= ${now} - ${request.horizonMs} * interval '1 millisecond'
        and ${matches('e', 's')}
        and not exists (select 1 from ${ref(schema, 'event_deliveries')} d where d.event_id = e.id and d.subscription = s.kind)
      order by e.id
      limit ${request.limit}`,
  );
}

/**
 * Deletes events published before `before` with their deliveries (EventPrune), at most `limit`,
 * oldest first, skipping rows another pruner holds. Their jobs are not touched: they have their own
 * retention.
 */
export async function pruneEvents(
  db: Executor,
  schema: string,
  request: { before: Date; limit: number },
): Promise<number> {
  const rows = await queryRows<{ n: number }>(
    db,
    sql`with doomed as (
        select id from ${ref(schema, 'events')} where published_at < ${request.before.toISOString()}::timestamptz
        order by published_at limit ${request.limit} for update skip locked
      ),
      gone as (delete from ${ref(schema, 'events')} e using doomed where e.id = doomed.id returning 1)
      select count(*)::int as n from gone`,
    schema,
  );
  return rows[0]?.n ?? 0;
}

/** An event as listed. */
export interface EventRecord {
  id: string;
  name: string;
  payload: unknown;
  dedupeKey: string | null;
  publishedAt: Date;
  /** Subscriptions active for its name when it was published; 0: no one listened. */
  subscribers: number;
  /** Jobs written for it (deliveries): at publish, and by reconciles and replays since. */
  deliveries: number;
}

type EventRow = {
  id: string;
  name: string;
  payload: unknown;
  dedupe_key: string | null;
  published_ms: number;
  subscribers: number;
  deliveries: number;
};

const eventColumns = (schema: string) => sql`e.id::text as id, e.name, e.payload, e.dedupe_key,
  ${epochMs(sql`e.published_at`)} as published_ms, e.subscribers,
  (select count(*)::int from ${ref(schema, 'event_deliveries')} d where d.event_id = e.id) as deliveries`;

const toEvent = (r: EventRow): EventRecord => ({
  id: r.id,
  name: r.name,
  payload: r.payload,
  dedupeKey: r.dedupe_key,
  publishedAt: toDate(r.published_ms) as Date,
  subscribers: r.subscribers,
  deliveries: r.deliveries,
});

/** Events by name and time range (EventList), newest first, at most `limit`; `unsubscribed`: only those no one listened to. */
export async function listEventRecords(
  db: Executor,
  schema: string,
  request: { name?: string; from?: Date; to?: Date; unsubscribed?: boolean; limit: number },
): Promise<EventRecord[]> {
  const filters: SQL[] = [sql`true`];
  if (request.name !== undefined) filters.push(sql`e.name = ${request.name}`);
  if (request.from) filters.push(sql`e.published_at >= ${request.from.toISOString()}::timestamptz`);
  if (request.to) filters.push(sql`e.published_at < ${request.to.toISOString()}::timestamptz`);
  if (request.unsubscribed) filters.push(sql`e.subscribers = 0`);
  const rows = await queryRows<EventRow>(
    db,
    sql`select ${eventColumns(schema)} from ${ref(schema, 'events')} e
      where ${sql.join(filters, sql` and `)} order by e.published_at desc, e.id desc limit ${request.limit}`,
    schema,
  );
  return rows.map(toEvent);
}

/** One delivery of an event: its subscriber's job and that job's state (null once the job was pruned). */
export interface EventDelivery {
  subscription: string;
  jobId: string;
  deliveredAt: Date;
  state: string | null;
  attempt: number | null;
  deadReason: string | null;
}

/** An event and its deliveries with their jobs' states (EventGet), or null. */
export async function getEventRecord(
  db: Executor,
  schema: string,
  id: string,
): Promise<(EventRecord & { jobs: EventDelivery[] }) | null> {
  if (!/^\d{1,19}$/.test(id)) return null;
  const [event] = await queryRows<EventRow>(
    db,
    sql`select ${eventColumns(schema)} from ${ref(schema, 'events')} e where e.id = ${id}::bigint`,
    schema,
  );
  if (!event) return null;
  const jobs = await queryRows<{
    subscription: string;
    job_id: string;
    delivered_ms: number;
    state: string | null;
    attempt: number | null;
    dead_reason: string | null;
  }>(
    db,
    sql`select d.subscription, d.job_id::text as job_id, ${epochMs(sql`d.delivered_at`)} as delivered_ms,
        j.state, j.attempt, j.dead_reason
      from ${ref(schema, 'event_deliveries')} d left join ${jobsRef(schema)} j on j.id = d.job_id
      where d.event_id = ${id}::bigint order by d.subscription`,
    schema,
  );
  return {
    ...toEvent(event),
    jobs: jobs.map((j) => ({
      subscription: j.subscription,
      jobId: j.job_id,
      deliveredAt: toDate(j.delivered_ms) as Date,
      state: j.state,
      attempt: j.attempt,
      deadReason: j.dead_reason,
    })),
  };
}

/** The event and subscription a job was written for (EventOfJob), or null: for `jobs why`. */
export async function eventOfJob(
  db: Executor,
  schema: string,
  jobId: string,
): Promise<{ eventId: string; name: string; subscription: string; publishedAt: Date } | null> {
  if (!/^\d{1,19}$/.test(jobId)) return null;
  const rows = await queryRows<{ event_id: string; name: string; subscription: string; published_ms: number }>(
    db,
    sql`select d.event_id::text as event_id, e.name, d.subscription, ${epochMs(sql`e.published_at`)} as published_ms
      from ${ref(schema, 'event_deliveries')} d join ${ref(schema, 'events')} e on e.id = d.event_id
      where d.job_id = ${jobId}::bigint`,
    schema,
  );
  const r = rows[0];
  return r
    ? { eventId: r.event_id, name: r.name, subscription: r.subscription, publishedAt: toDate(r.published_ms) as Date }
    : null;
}

/**
 * The events published since `since` with no subscriber, by name (EventUnsubscribedCounts): what
 * `skiplock stats` and the maintenance report flag, as they flag a queue no worker serves.
 */
export async function unsubscribedEventCounts(
  db: Executor,
  schema: string,
  since: Date,
): Promise<{ name: string; count: number; lastPublishedAt: Date }[]> {
  const rows = await queryRows<{ name: string; n: number; last_ms: number }>(
    db,
    sql`select name, count(*)::int as n, ${epochMs(sql`max(published_at)`)} as last_ms
      from ${ref(schema, 'events')}
      where published_at >= ${since.toISOString()}::timestamptz and subscribers = 0
      group by name order by name`,
    schema,
  );
  return rows.map((r) => ({ name: r.name, count: r.n, lastPublishedAt: toDate(r.last_ms) as Date }));
}
