import type { SQL } from 'drizzle-orm';
import {
  ConfigError,
  DiscardError,
  InvalidOptionsError,
  PayloadTooLargeError,
  PayloadValidationError,
} from '../base/errors.js';
import { assertLabel, assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { SkiplockConnection } from '../db/connect.js';
import {
  type Delivered,
  type EventDelivery,
  type EventRecord,
  getEventRecord,
  listEventRecords,
  listSubscriptions as listSubscriptionRecords,
  type PublishRow,
  replayEvents as replayEventsStatement,
  retireSubscriptions as retireSubscriptionsStatement,
  type SubscriptionRecord,
  type SubscriptionSpec,
  syncSubscriptions as syncSubscriptionsStatement,
  unsubscribedEventCounts,
} from '../db/statements/events.js';
import {
  check,
  describeIssues,
  issuesOf,
  type PayloadInput,
  type PayloadOutput,
  type PayloadSchema,
} from './issues.js';
import { defineJob, type JobContext, type JobDefinition, type JobKindOptions, type JobRegistry } from './jobs.js';

export type { Delivered, EventDelivery, EventRecord, SubscriptionRecord, SubscriptionSpec };

/** An event: a name and the zod schema of its payload. Publish it with `publish(db, event, payload)`. */
export interface EventDefinition<S extends PayloadSchema = PayloadSchema> {
  readonly name: string;
  readonly schema: S;
}

/** Defines an event once, where both the publisher and its subscribers can import it. */
export function defineEvent<S extends PayloadSchema>(options: { name: string; schema: S }): EventDefinition<S> {
  return { name: assertLabel('event', options.name), schema: options.schema };
}

/** A payload path: `'order.customerId'` or `['order', 'customerId']`. */
export type PayloadPath = string | readonly string[];

/** The job options of a subscriber that its stored subscription carries (the publisher applies them). */
export interface SubscriberOptions<E extends PayloadSchema, I> {
  /** The subscriber's kind: its jobs' kind, and the subscription's name. */
  kind: string;
  /**
   * Only events whose payload contains this JSON (Postgres jsonb `@>`), checked in the publish
   * statement: no job is written for another event. @defaultValue every event
   */
  where?: Record<string, unknown>;
  /**
   * The handler's input from the event's payload, run by the worker before the handler (its result
   * is validated against `input` when given; a failure sends the job to the DLQ as validation_error).
   * @defaultValue the event's payload
   */
  map?: (payload: PayloadOutput<E>) => I;
  /** zod schema of what `map` returns. @defaultValue none */
  input?: PayloadSchema;
  /** Its jobs' queue. @defaultValue 'default' */
  queue?: string;
  /** @defaultValue 0 */
  priority?: number;
  /** @defaultValue 25 */
  maxAttempts?: number;
  /** @defaultValue 30000 */
  timeoutMs?: number;
  /** The back-off between its retries (the worker applies it). @defaultValue the kinds' default */
  backoff?: JobKindOptions<E>['backoff'];
  /** Each job must start within this long after its event, else it goes to the DLQ (deadline_exceeded). @defaultValue none */
  deadlineMs?: number;
  /** The payload path of the ordering key: one job per key at a time, in publish order. @defaultValue none */
  orderingKey?: PayloadPath;
  /** @defaultValue 'continue' */
  orderingOnDead?: 'continue' | 'hold';
  /** The payload path of the concurrency key (fair share, the queue's keyConcurrency). @defaultValue none */
  concurrencyKey?: PayloadPath;
  /** The payload path of the destination (its circuit breaker). @defaultValue none */
  destination?: PayloadPath;
  /** At most this many of its jobs run at once. @defaultValue no limit */
  concurrency?: number;
  rateLimit?: JobKindOptions<E>['rateLimit'];
  runWindow?: JobKindOptions<E>['runWindow'];
  breaker?: JobKindOptions<E>['breaker'];
  sensitive?: readonly string[];
  /** Runs each job: the mapped input (or the event's payload) and the usual context. */
  handler?: (input: I, context: JobContext) => unknown;
}

/** A subscriber: a job kind (register it with the worker like any kind) and its stored subscription. */
export interface SubscriberDefinition<E extends PayloadSchema = PayloadSchema> extends JobDefinition<E, false> {
  readonly subscription: SubscriptionSpec;
}

const pathOf = (owner: string, name: string, path: PayloadPath | undefined): string[] | null => {
  if (path === undefined) return null;
  const parts = typeof path === 'string' ? path.split('.') : [...path];
  if (parts.length === 0 || parts.length > 16 || parts.some((p) => typeof p !== 'string' || p.length === 0)) {
    throw new ConfigError(`${owner}: ${name} must be a payload path such as 'order.id' or ['order', 'id']`);
  }
  return parts;
};

/** The value at `path` in `payload`, as the publish statement reads it (`#>>`, at most 255 characters). */
function keyAt(payload: unknown, path: readonly string[] | null): string | undefined {
  if (!path) return undefined;
  let value: unknown = payload;
  for (const part of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  if (value === null || value === undefined) return undefined;
  const text = (typeof value === 'object' ? JSON.stringify(value) : String(value)).slice(0, 255);
  return text === '' ? undefined : text;
}

/**
 * Declares a subscriber of `event` in the reacting function's code. It is a job kind whose jobs hold
 * the event's payload; register it with that function's worker. Its subscription (filter, job
 * options, key paths) is stored in the database by `skiplock sync` at deploy and by its workers, and
 * read there by every publish: the publisher need not import it.
 */
export function subscribe<E extends PayloadSchema, I = PayloadOutput<E>>(
  event: EventDefinition<E>,
  options: SubscriberOptions<E, I>,
): SubscriberDefinition<E> {
  const kind = assertLabel('kind', options.kind);
  if (
    options.where !== undefined &&
    (options.where === null || typeof options.where !== 'object' || Array.isArray(options.where))
  ) {
    throw new ConfigError(`${kind}: where must be a JSON object (matched with jsonb @>)`);
  }
  if (options.deadlineMs !== undefined && !(Number.isInteger(options.deadlineMs) && options.deadlineMs >= 1)) {
    throw new ConfigError(`${kind}: deadlineMs must be a positive integer`);
  }
  const orderingPath = pathOf(kind, 'orderingKey', options.orderingKey);
  const concurrencyPath = pathOf(kind, 'concurrencyKey', options.concurrencyKey);
  const destinationPath = pathOf(kind, 'destination', options.destination);
  const { map, input, handler } = options;
  const run =
    handler &&
    ((payload: PayloadOutput<E>, context: JobContext) => {
      if (!map) return handler(payload as unknown as I, context);
      let mapped: unknown;
      try {
        mapped = map(payload);
      } catch (err) {
        throw new DiscardError(`${kind}: map threw: ${err instanceof Error ? err.message : String(err)}`, {
          reason: 'validation_error',
        });
      }
      if (input) {
        const parsed = check(input, mapped);
        if (!parsed.success) {
          throw new DiscardError(`${kind}: map's result does not match input: ${describeIssues(parsed.error)}`, {
            reason: 'validation_error',
          });
        }
        mapped = parsed.data;
      }
      return handler(mapped as I, context);
    });
  const job = defineJob<E, false>({
    kind,
    payload: event.schema,
    ...(options.queue !== undefined ? { queue: options.queue } : {}),
    ...(options.priority !== undefined ? { priority: options.priority } : {}),
    ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.backoff !== undefined ? { backoff: options.backoff } : {}),
    ...(options.orderingOnDead !== undefined ? { orderingOnDead: options.orderingOnDead } : {}),
    ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
    ...(options.rateLimit !== undefined ? { rateLimit: options.rateLimit } : {}),
    ...(options.runWindow !== undefined ? { runWindow: options.runWindow } : {}),
    ...(options.breaker !== undefined ? { breaker: options.breaker } : {}),
    ...(options.sensitive !== undefined ? { sensitive: options.sensitive } : {}),
    // An enqueue of the kind by hand (a test, the CLI) takes the same keys as a publish.
    ...(orderingPath ? { orderingKey: (p: unknown) => keyAt(p, orderingPath) } : {}),
    ...(concurrencyPath ? { concurrencyKey: (p: unknown) => keyAt(p, concurrencyPath) } : {}),
    ...(destinationPath ? { destination: (p: unknown) => keyAt(p, destinationPath) } : {}),
    ...(run ? { handler: run } : {}),
  });
  const subscription: SubscriptionSpec = {
    kind,
    event: event.name,
    where: options.where ? (JSON.parse(JSON.stringify(options.where)) as Record<string, unknown>) : null,
    queue: job.queue,
    priority: job.priority,
    maxAttempts: job.maxAttempts,
    deadlineMs: options.deadlineMs ?? null,
    orderingPath,
    orderingHold: job.orderingOnDead === 'hold',
    concurrencyPath,
    destinationPath,
  };
  const definition: SubscriberDefinition<E> = {
    ...job,
    subscription,
    with: (payload, requestOptions = {}) => ({ job: definition, payload, options: requestOptions }),
  };
  return definition;
}

/** Whether a kind is a subscriber. */
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export function isSubscriber(definition: JobDefinition<any, any>): definition is SubscriberDefinition {
  return 'subscription' in definition && typeof (definition as SubscriberDefinition).subscription === 'object';
}

/** The subscriptions of a set of kinds (its subscribers'), by kind. */
// biome-ignore lint/suspicious/noExplicitAny: kinds of every payload type.
export function subscriptionsOf(definitions: Iterable<JobDefinition<any, any>>): SubscriptionSpec[] {
  const specs: SubscriptionSpec[] = [];
  for (const d of definitions) if (isSubscriber(d)) specs.push(d.subscription);
  return specs.sort((a, b) => (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0));
}

export interface EventsAdminOptions {
  /** @defaultValue 'skiplock' */
  schema?: string;
  now?: Date;
}

/**
 * Writes the subscriptions of `registry`'s subscribers (`skiplock sync` at deploy; the workers do it
 * too, with their row in `workers`). An unchanged one writes nothing. `prune`: retire every active
 * subscription whose kind is not in the registry (only when the registry holds every subscriber of
 * the app). Returns the kinds written and retired.
 */
export async function syncSubscriptions(
  conn: SkiplockConnection,
  registry: JobRegistry,
  options: EventsAdminOptions & { prune?: boolean } = {},
): Promise<{ written: string[]; retired: string[]; subscriptions: number }> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const specs = subscriptionsOf(registry.all());
  const written = await syncSubscriptionsStatement(conn.executor, schema, specs, options.now);
  const retired = options.prune
    ? await retireSubscriptionsStatement(conn.executor, schema, { except: specs.map((s) => s.kind) }, options.now)
    : [];
  return { written, retired, subscriptions: specs.length };
}

/** Retires subscriptions by kind: publishes stop writing their jobs; the rows stay (retired_at). */
export async function retireSubscriptions(
  conn: SkiplockConnection,
  kinds: readonly string[],
  options: EventsAdminOptions = {},
): Promise<string[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  return retireSubscriptionsStatement(conn.executor, schema, { kinds }, options.now);
}

/** Every subscription in the database, active and retired. */
export async function listSubscriptions(
  conn: SkiplockConnection,
  options: EventsAdminOptions = {},
): Promise<SubscriptionRecord[]> {
  return listSubscriptionRecords(conn.executor, assertSchemaName(options.schema ?? DEFAULT_SCHEMA));
}

export interface ListEventsOptions extends EventsAdminOptions {
  name?: string;
  from?: Date;
  to?: Date;
  /** Only the events published with no subscriber. @defaultValue false */
  unsubscribed?: boolean;
  /** @defaultValue 100 (at most 10000) */
  limit?: number;
}

/** Events by name and time range, newest first. */
export async function listEvents(conn: SkiplockConnection, options: ListEventsOptions = {}): Promise<EventRecord[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new InvalidOptionsError('limit must be an integer from 1 to 10000');
  }
  return listEventRecords(conn.executor, schema, { ...options, limit });
}

/**
 * The events published in the last `withinMs` (default an hour) that no subscription was active for,
 * by name: flagged by `skiplock stats` and the maintenance report, like a queue no worker serves.
 */
export async function unsubscribedEvents(
  conn: SkiplockConnection,
  options: EventsAdminOptions & { withinMs?: number } = {},
): Promise<{ name: string; count: number; lastPublishedAt: Date }[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const now = options.now?.getTime() ?? Date.now();
  return unsubscribedEventCounts(conn.executor, schema, new Date(now - (options.withinMs ?? 3_600_000)));
}

/** An event with its subscribers' jobs and their states, or null. */
export async function getEvent(
  conn: SkiplockConnection,
  id: string,
  options: EventsAdminOptions = {},
): Promise<(EventRecord & { jobs: EventDelivery[] }) | null> {
  return getEventRecord(conn.executor, assertSchemaName(options.schema ?? DEFAULT_SCHEMA), id);
}

export interface ReplayEventsOptions extends EventsAdminOptions {
  /** The subscriber (its kind) to give the events it missed. */
  subscription: string;
  /** Events published from this time on. */
  from: Date;
  /** … and before this one. @defaultValue now */
  to?: Date;
  /** @defaultValue 1000 (at most 10000) */
  limit?: number;
}

/**
 * Gives a subscriber the events of its name it has no job for, published in [from, to): a job each,
 * in one statement. Idempotent: a second replay, or a reconcile beside it, writes no job twice.
 */
export async function replayEvents(conn: SkiplockConnection, options: ReplayEventsOptions): Promise<Delivered[]> {
  const schema = assertSchemaName(options.schema ?? DEFAULT_SCHEMA);
  const limit = options.limit ?? 1_000;
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new InvalidOptionsError('limit must be an integer from 1 to 10000');
  }
  const to = options.to ?? options.now ?? new Date();
  if (
    !(options.from instanceof Date) ||
    Number.isNaN(options.from.getTime()) ||
    !(to.getTime() > options.from.getTime())
  ) {
    throw new InvalidOptionsError('replayEvents needs from < to');
  }
  const subscription = assertLabel('kind', options.subscription);
  const delivered = await replayEventsStatement(conn.executor, schema, { subscription, from: options.from, to, limit });
  if (delivered.length > 0) return delivered;
  // Nothing written: say so when the name is wrong, rather than look like a replay with nothing missing.
  const found = (await listSubscriptionRecords(conn.executor, schema)).find((s) => s.kind === subscription);
  if (!found) {
    throw new InvalidOptionsError(`no subscription ${subscription} (skiplock events subscriptions lists them)`);
  }
  if (found.retiredAt) {
    throw new InvalidOptionsError(
      `subscription ${subscription} is retired: its worker or skiplock sync makes it active again`,
    );
  }
  return delivered;
}

/** An event's payload validated against its schema, as the JSON text the publish statement stores. */
export function eventPayloadJson<S extends PayloadSchema>(
  event: EventDefinition<S>,
  payload: PayloadInput<S>,
  maxPayloadBytes: number,
): string {
  const parsed = check(event.schema, payload);
  if (!parsed.success) throw new PayloadValidationError(`event ${event.name}`, issuesOf(parsed.error));
  let json: string;
  try {
    json = JSON.stringify(parsed.data ?? null);
  } catch (err) {
    throw new PayloadValidationError(`event ${event.name}`, [
      { path: '', message: `cannot be serialized as JSON (${(err as Error).name})` },
    ]);
  }
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxPayloadBytes) throw new PayloadTooLargeError(`event ${event.name}`, bytes, maxPayloadBytes);
  return json;
}

export interface PublishOptions {
  /**
   * A retried publish with the same key (per event name) writes nothing and returns the first one's
   * id: what makes a publish safe to retry after an answer lost on the way back (neon-http).
   * @defaultValue none
   */
  dedupeKey?: string;
  /** Start workers for the subscribers' queues after the write (needs a nudger). @defaultValue false */
  nudge?: boolean;
}

export interface PublishResult {
  /** The event's id (the earlier event's for a duplicate; null when even a second read could not see it). */
  eventId: string | null;
  /** A publish with this dedupe key was already written: nothing was written now. */
  duplicate: boolean;
  /** Subscriptions active for the event's name; 0: no one listens (the event is kept and flagged). */
  subscribers: number;
  /** The jobs written, one per subscriber whose filter the payload matched. */
  jobs: { id: string; kind: string; queue: string }[];
}

/** A publish as one statement for a neon-http `db.batch([...])` (like prepareEnqueue). */
export interface PreparedPublish {
  statements: SQL[];
  read(results: readonly unknown[]): PublishResult;
}

/** The dedupe key of a publish, checked. */
export function publishDedupeKey(event: EventDefinition, options: PublishOptions | undefined): string | null {
  const key = options?.dedupeKey;
  if (key === undefined) return null;
  if (typeof key !== 'string' || key.length < 1 || key.length > 255) {
    throw new InvalidOptionsError(`invalid publish options for ${event.name}: dedupeKey must be 1-255 characters`);
  }
  return key;
}

/** What the publish statement's rows say. */
export function readPublishRows(rows: readonly PublishRow[]): PublishResult {
  const first = rows[0];
  return {
    eventId: first?.event_id ?? null,
    duplicate: first?.inserted === false,
    subscribers: Number(first?.subscribers ?? 0),
    jobs: rows
      .filter((r) => r.job_id !== null)
      .map((r) => ({ id: r.job_id as string, kind: r.kind as string, queue: r.queue as string })),
  };
}
