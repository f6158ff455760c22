import type { SQL } from 'drizzle-orm';
import {
  ConfigError,
  InvalidOptionsError,
  PayloadTooLargeError,
  PayloadValidationError,
  SkiplockError,
} from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { JobInsertRow } from '../base/rows.js';
import { queryRows } from '../db/execute.js';
import type { Executor } from '../db/executor.js';
import { type ExecutorSource, executorOf } from '../db/executor-of.js';
import {
  findDedupeHolders,
  type InsertRow,
  insertJobs,
  insertJobsStatement,
  readInsertOutcomes,
} from '../db/statements/enqueue.js';
import { findEventByDedupeKey, type PublishRow, publishEventStatement } from '../db/statements/events.js';
import { type EnqueueOptions, toInsertRow } from './enqueue-options.js';
import {
  type EventDefinition,
  eventPayloadJson,
  type PreparedPublish,
  type PublishOptions,
  type PublishResult,
  publishDedupeKey,
  readPublishRows,
} from './events.js';
import { check, issuesOf, type PayloadInput, type PayloadSchema } from './issues.js';
import type { JobDefinition, JobRegistry, JobRequest } from './jobs.js';
import type { EventMetrics } from './metrics.js';
import type { Nudger } from './nudge.js';
import { type PreparedSignal, prepareSignal, type SignalOptions, type SignalResult, sendSignal } from './signals.js';
import { unstorableInJson } from './text.js';
import type { Tracing } from './tracing.js';

export interface EnqueueConfig {
  /** Schema holding skiplock's tables. @defaultValue 'skiplock' */
  schema?: string;
  /** Largest accepted payload, in bytes of JSON. @defaultValue 262144 (256 KiB) */
  maxPayloadBytes?: number;
  /**
   * Starts workers for the queues of jobs enqueued with `nudge: true`, and for `nudge(queues)`
   * (e.g. `createLambdaNudger` from skiplock/lambda). @defaultValue none: jobs wait for the cron tick
   */
  nudger?: Nudger;
  /**
   * A producer span around each enqueue, whose context is stored with its jobs for their attempts'
   * spans to link to: `otelTracing()` from `skiplock/otel` (OpenTelemetry). @defaultValue none
   */
  tracing?: Tracing;
  /**
   * Told each publish's event and how many subscriber jobs it wrote: `otelMetrics()` from
   * `skiplock/otel` (the counter `skiplock.events.published`). @defaultValue none
   */
  metrics?: EventMetrics;
}

export const ENQUEUE_DEFAULTS = { schema: DEFAULT_SCHEMA, maxPayloadBytes: 256 * 1024 } as const;

export interface EnqueueResult {
  id: string;
  /**
   * - inserted: a new job was written;
   * - deduplicated: a job already held the dedupe key (skip, window); its id is returned;
   * - replaced: the waiting job with the key took this payload/run_at/priority (replace).
   */
  outcome: 'inserted' | 'deduplicated' | 'replaced';
}

export interface PreparedEnqueue {
  statements: SQL[];
  read(results: readonly unknown[]): { id: string | null; outcome: EnqueueResult['outcome'] }[];
}

/**
 * Where enqueue writes: a connection from connect(), any Drizzle Postgres database or transaction, or
 * a queryExecutor over any other client (db/executor-of.ts).
 */
export type EnqueueTarget = ExecutorSource;

export interface Enqueuer {
  /** Enqueues one job, in `db`'s transaction when `db` is one. */
  enqueue<S extends PayloadSchema>(
    db: EnqueueTarget,
    job: JobDefinition<S>,
    payload: PayloadInput<S>,
    options?: EnqueueOptions,
  ): Promise<EnqueueResult>;
  /** Enqueues many jobs (of any kinds, any dedupe modes) in one statement: all of them or none. */
  enqueueMany(db: EnqueueTarget, requests: readonly JobRequest[]): Promise<EnqueueResult[]>;
  /**
   * Validates now and returns the statements to run inside a neon-http `db.batch([...])`
   * next to the caller's own writes (that driver has no interactive transactions):
   * `const [, ...raw] = await db.batch([db.insert(orders)…, ...p.statements.map((s) => db.execute(s))])`
   * then `p.read(raw)`. A deduplicated row whose holder the batch could not see has id null.
   */
  prepareEnqueue(requests: readonly JobRequest[]): PreparedEnqueue;
  /**
   * Starts workers for these queues now, through the configured nudger (nothing without one). Call
   * it after your transaction (or neon-http batch) committed: `await nudge([sendEmail.queue])`.
   * It first tells the nudger those queues were written (`noteDue`: on Vercel, the idle ticks' hint
   * is marked stale), which a neon-http batch of prepareEnqueue / preparePublish / prepareSignal
   * cannot do by itself. Never rejects: a failed nudge is logged and the cron tick runs the jobs.
   */
  nudge(queues: Iterable<string>): Promise<void>;
  /**
   * Enqueues a flow — steps by name, each `after` the steps (and jobs) it names — in one statement:
   * all of them or none. `{ fetch: fetch.with(p), report: report.with(q, { after: ['fetch'] }) }`.
   * Returns each step's result by name. A step another waits for takes no dedupe key.
   */
  enqueueFlow<K extends string>(
    db: EnqueueTarget,
    steps: Readonly<Record<K, JobRequest>>,
  ): Promise<Record<K, EnqueueResult>>;
  /** Enqueues a chain: each request runs after the one before it completed (enqueueFlow, in order). */
  enqueueChain(db: EnqueueTarget, requests: readonly JobRequest[]): Promise<EnqueueResult[]>;
  /**
   * Sends a signal on `key` to the job waiting for it (`ctx.waitForSignal`), in `db`'s transaction
   * when `db` is one: the signal exists only if that transaction commits. A signal sent before its
   * wait began is kept for it. The payload is bounded by maxPayloadBytes. `{ nudge: true }` starts
   * workers for the woken jobs' queues (needs a nudger).
   */
  signal(db: EnqueueTarget, key: string, payload?: unknown, options?: SignalOptions): Promise<SignalResult>;
  /** A signal as statements for a neon-http `db.batch([...])`, like prepareEnqueue (`id`: as signal's). */
  prepareSignal(key: string, payload?: unknown, options?: { id?: string }): PreparedSignal;
  /**
   * Publishes an event, in `db`'s transaction when `db` is one: the event and one job per active
   * subscription of its name whose filter the payload matches, in ONE statement (the subscriptions
   * are read from the database, written there by `skiplock sync` and the subscribers' workers).
   * A `dedupeKey` makes a retried publish write nothing twice.
   */
  publish<S extends PayloadSchema>(
    db: EnqueueTarget,
    event: EventDefinition<S>,
    payload: PayloadInput<S>,
    options?: PublishOptions,
  ): Promise<PublishResult>;
  /**
   * A publish as a statement for a neon-http `db.batch([...])` next to the caller's own writes:
   * `const [, raw] = await db.batch([db.insert(orders)…, db.execute(p.statements[0])])`, then
   * `p.read([raw])`. Nudge after the batch with `nudge(result.jobs.map((j) => j.queue))`.
   */
  preparePublish<S extends PayloadSchema>(
    event: EventDefinition<S>,
    payload: PayloadInput<S>,
    options?: { dedupeKey?: string },
  ): PreparedPublish;
  /** Enqueue by kind name (HTTP, CLI): the kind must be in `registry`. */
  enqueueByKind(
    db: EnqueueTarget,
    registry: JobRegistry,
    kind: string,
    payload: unknown,
    options?: EnqueueOptions,
  ): Promise<EnqueueResult>;
}

/** Builds enqueue functions bound to a schema and payload limit. */
export function createEnqueuer(config: EnqueueConfig = {}): Enqueuer {
  const schema = assertSchemaName(config.schema ?? ENQUEUE_DEFAULTS.schema);
  const maxPayloadBytes = config.maxPayloadBytes ?? ENQUEUE_DEFAULTS.maxPayloadBytes;
  if (!Number.isInteger(maxPayloadBytes) || maxPayloadBytes < 1) {
    throw new ConfigError('maxPayloadBytes must be a positive integer');
  }

  const toRow = (ord: number, request: JobRequest): JobInsertRow => jobInsertRow(ord, request, maxPayloadBytes);

  const enqueueMany = async (target: EnqueueTarget, requests: readonly JobRequest[]) =>
    // Validate everything before writing anything.
    writeRows(
      target,
      requests,
      requests.map((request, ord) => toRow(ord, request)),
    );

  const enqueueFlow = async <K extends string>(target: EnqueueTarget, steps: Readonly<Record<K, JobRequest>>) => {
    const names = Object.keys(steps) as K[];
    const requests = names.map((name) => steps[name]);
    const rows = flowRows(names, requests, maxPayloadBytes);
    const results = await writeRows(target, requests, rows);
    return Object.fromEntries(names.map((name, ord) => [name, results[ord]])) as Record<K, EnqueueResult>;
  };

  const enqueueChain = async (target: EnqueueTarget, requests: readonly JobRequest[]) => {
    const steps: Record<string, JobRequest> = {};
    requests.forEach((request, i) => {
      const after = [...(request.options?.after ?? []), ...(i > 0 ? [`step-${i - 1}`] : [])];
      steps[`step-${i}`] = { ...request, options: { ...request.options, ...(after.length > 0 ? { after } : {}) } };
    });
    return Object.values(await enqueueFlow(target, steps)) as EnqueueResult[];
  };

  const writeRows = async (target: EnqueueTarget, requests: readonly JobRequest[], rows: JobInsertRow[]) => {
    if (rows.length === 0) return [];
    const nudged = rows.filter((row) => requests[row.ord]?.options?.nudge === true).map((row) => row.queue);
    if (nudged.length > 0 && !config.nudger) {
      throw new InvalidOptionsError('nudge: true needs a nudger: createEnqueuer({ nudger })');
    }
    const { tracing } = config;
    const results = tracing
      ? await tracing.enqueue(
          rows,
          (carrier) =>
            insertRows(executorOf(target), carrier ? rows.map((row) => ({ ...row, trace_context: carrier })) : rows),
          (written) => written.map((r) => r.id),
        )
      : await insertRows(executorOf(target), rows);
    await noteDue(requests, rows);
    if (nudged.length > 0) await config.nudger?.nudge(nudged);
    return results;
  };

  /** Tells the nudger these queues were written, due now (its failure is the nudger's to log). */
  const noteWritten = async (queues: readonly string[]) =>
    config.nudger?.noteDue?.(queues.map((queue) => ({ queue, at: null })))?.catch(() => {});

  /** Tells the nudger when the written jobs are due (for platforms whose idle workers sleep). */
  const noteDue = async (requests: readonly JobRequest[], rows: readonly JobInsertRow[]) => {
    const note = config.nudger?.noteDue;
    if (!note) return;
    const now = Date.now();
    const due = rows.map((row) => {
      const options = requests[row.ord]?.options;
      const at = options?.runAt ?? (options?.delayMs ? new Date(now + options.delayMs) : null);
      return { queue: row.queue, at };
    });
    await note.call(config.nudger, due).catch(() => {});
  };

  /** Writes the rows (a second pass for dedupe holders it could not see), one result per row. */
  const insertRows = async (db: Executor, rows: JobInsertRow[]): Promise<EnqueueResult[]> => {
    const results: (EnqueueResult | undefined)[] = new Array(rows.length);
    const supersededBy = supersededReplaceRows(rows);

    // Every row in one statement (replace upserts beside the other inserts), so a row the
    // database refuses leaves nothing written on any driver, with no transaction around it.
    let pending = rows.filter((r) => !supersededBy.has(r.ord));
    // A deduplicated row whose key holder finished before we could see it is simply
    // inserted on the next pass; three passes settle any realistic race.
    for (let pass = 0; pending.length > 0 && pass < 3; pass++) {
      // A row written again waits for its parents in this call by their ids now (they have no
      // dedupe key, so the first pass inserted them).
      if (pass > 0) pending = pending.map((row) => withParentIds(row, results));
      const outcomes = await insertJobs(db, schema, pending);
      const unresolved: { row: JobInsertRow; windowStartMs: number | null }[] = [];
      for (const outcome of outcomes) {
        const row = rows[outcome.ord] as JobInsertRow;
        if (outcome.id !== null) {
          results[row.ord] = { id: outcome.id, outcome: outcomeOf(row, outcome.inserted) };
        } else {
          unresolved.push({ row, windowStartMs: outcome.windowStartMs });
        }
      }
      pending = [];
      if (unresolved.length === 0) break;
      const holders = await findDedupeHolders(
        db,
        schema,
        unresolved.map(({ row, windowStartMs }) => ({
          ord: row.ord,
          kind: row.kind,
          dedupe_key: row.dedupe_key as string,
          dedupe_mode: row.dedupe_mode as string,
          window_start_ms: windowStartMs,
        })),
      );
      for (const { row } of unresolved) {
        const id = holders.get(row.ord);
        if (id) results[row.ord] = { id, outcome: 'deduplicated' };
        else pending.push(row);
      }
    }
    // Earlier rows for the same replace key were superseded inside this call by the last one.
    for (const [ord, winner] of supersededBy) {
      results[ord] = { id: (results[winner] as EnqueueResult).id, outcome: 'replaced' };
    }
    if (pending.length > 0) {
      throw new SkiplockError('dedupe_conflict', 'could not settle dedupe keys under heavy contention; retry');
    }
    return results as EnqueueResult[];
  };

  const prepareEnqueue = (requests: readonly JobRequest[]): PreparedEnqueue => {
    const rows = requests.map((request, ord) => toRow(ord, request));
    const supersededBy = supersededReplaceRows(rows);
    const written = rows.filter((r) => !supersededBy.has(r.ord));
    return {
      statements: written.length > 0 ? [insertJobsStatement(schema, written)] : [],
      read: (raw) => {
        const results: { id: string | null; outcome: EnqueueResult['outcome'] }[] = new Array(rows.length);
        const outcomes = raw.flatMap((r) => readInsertOutcomes((r as { rows: InsertRow[] }).rows));
        for (const o of outcomes) {
          results[o.ord] = { id: o.id, outcome: outcomeOf(rows[o.ord] as JobInsertRow, o.inserted) };
        }
        for (const [ord, winner] of supersededBy) {
          results[ord] = { id: results[winner]?.id ?? null, outcome: 'replaced' };
        }
        return results;
      },
    };
  };

  const publish = async <S extends PayloadSchema>(
    target: EnqueueTarget,
    event: EventDefinition<S>,
    payload: PayloadInput<S>,
    options: PublishOptions = {},
  ): Promise<PublishResult> => {
    const payloadJson = eventPayloadJson(event, payload, maxPayloadBytes);
    const dedupeKey = publishDedupeKey(event, options);
    if (options.nudge === true && !config.nudger) {
      throw new InvalidOptionsError('nudge: true needs a nudger: createEnqueuer({ nudger })');
    }
    const db = executorOf(target);
    const write = async (traceContext: Record<string, string> | null) =>
      readPublishRows(
        await queryRows<PublishRow>(
          db,
          publishEventStatement(schema, { name: event.name, payloadJson, dedupeKey, traceContext }),
          schema,
        ),
      );
    const { tracing } = config;
    const result = tracing?.publish ? await tracing.publish(event.name, write, (r) => r.jobs) : await write(null);
    if (result.eventId === null && dedupeKey !== null) {
      // The key's holder committed after this statement's snapshot was taken.
      const found = await findEventByDedupeKey(db, schema, event.name, dedupeKey);
      if (found) Object.assign(result, { eventId: found.id, subscribers: found.subscribers });
    }
    config.metrics?.published({
      name: event.name,
      subscribers: result.subscribers,
      jobs: result.jobs.length,
      duplicate: result.duplicate,
    });
    const queues = [...new Set(result.jobs.map((j) => j.queue))];
    if (queues.length > 0) {
      await noteWritten(queues);
      if (options.nudge === true) await config.nudger?.nudge(queues);
    }
    return result;
  };

  return {
    prepareEnqueue,
    publish,
    preparePublish: (event, payload, options = {}) => {
      const payloadJson = eventPayloadJson(event, payload, maxPayloadBytes);
      const dedupeKey = publishDedupeKey(event, options);
      return {
        statements: [publishEventStatement(schema, { name: event.name, payloadJson, dedupeKey, traceContext: null })],
        read: (raw) => readPublishRows((raw[0] as { rows: PublishRow[] }).rows),
      };
    },
    nudge: async (queues) => {
      const named = [...queues];
      await noteWritten(named);
      await config.nudger?.nudge(named);
    },
    signal: async (db, key, payload, options = {}) => {
      if (options.nudge === true && !config.nudger) {
        throw new InvalidOptionsError('nudge: true needs a nudger: createEnqueuer({ nudger })');
      }
      const result = await sendSignal(db, schema, key, payload, maxPayloadBytes, { id: options.id });
      if (result.queues.length > 0) {
        await noteWritten(result.queues);
      }
      if (options.nudge === true && result.queues.length > 0) await config.nudger?.nudge(result.queues);
      return result;
    },
    prepareSignal: (key, payload, options) => prepareSignal(schema, key, payload, maxPayloadBytes, options),
    enqueue: async (db, job, payload, options = {}) =>
      (await enqueueMany(db, [{ job, payload, options }]))[0] as EnqueueResult,
    enqueueMany,
    enqueueFlow,
    enqueueChain,
    enqueueByKind: async (db, registry, kind, payload, options = {}) =>
      (await enqueueMany(db, [{ job: registry.get(kind), payload, options }]))[0] as EnqueueResult,
  };
}

const defaultEnqueuer = createEnqueuer();
/** enqueue() on the default `skiplock` schema with the default payload limit. */
export const enqueue = defaultEnqueuer.enqueue;
/** enqueueMany() on the default `skiplock` schema with the default payload limit. */
export const enqueueMany = defaultEnqueuer.enqueueMany;
/** enqueueFlow() on the default `skiplock` schema with the default payload limit. */
export const enqueueFlow = defaultEnqueuer.enqueueFlow;
/** enqueueChain() on the default `skiplock` schema with the default payload limit. */
export const enqueueChain = defaultEnqueuer.enqueueChain;
/** enqueueByKind() on the default `skiplock` schema with the default payload limit. */
export const enqueueByKind = defaultEnqueuer.enqueueByKind;
/** publish() on the default `skiplock` schema with the default payload limit (see Enqueuer.publish). */
export const publish = defaultEnqueuer.publish;
/** signal() on the default schema (see Enqueuer.signal). */
export const signal = defaultEnqueuer.signal;

/**
 * A request as the row to insert: the payload validated against the kind's schema, checked as
 * storable JSON of at most `maxPayloadBytes`, the options merged over the kind's defaults.
 */
export function jobInsertRow(
  ord: number,
  request: JobRequest,
  maxPayloadBytes: number,
  steps?: ReadonlyMap<string, number>,
): JobInsertRow {
  const { job } = request;
  const parsed = check(job.payloadSchema, request.payload);
  if (!parsed.success) {
    throw new PayloadValidationError(job.kind, issuesOf(parsed.error));
  }
  let json: string;
  try {
    json = JSON.stringify(parsed.data ?? null);
  } catch (err) {
    // Cycles, BigInts, nesting deeper than the stack: not a payload a job can carry.
    throw new PayloadValidationError(job.kind, [
      { path: '', message: `cannot be serialized as JSON (${(err as Error).name})` },
    ]);
  }
  const unstorable = unstorableInJson(json);
  if (unstorable) throw new PayloadValidationError(job.kind, [{ path: '', message: `contains ${unstorable}` }]);
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > maxPayloadBytes) throw new PayloadTooLargeError(job.kind, bytes, maxPayloadBytes);
  return toInsertRow(ord, job, json, request.options, steps);
}

const STEP_NAME = /^[A-Za-z_][A-Za-z0-9_.:-]{0,99}$/;

/**
 * A flow's rows: step names checked (a name is never all digits, so it cannot be taken for a job
 * id), `after` resolved to the steps it names, and no step waiting for itself through any path. A
 * step another waits for takes no dedupe key: a deduplicated parent is not the job its children
 * were written for.
 */
function flowRows(names: readonly string[], requests: readonly JobRequest[], maxPayloadBytes: number): JobInsertRow[] {
  for (const name of names) {
    if (!STEP_NAME.test(name)) {
      throw new InvalidOptionsError(
        `flow step name ${JSON.stringify(name.slice(0, 40))} must start with a letter or _ and have at most 100 letters, digits, _ . : -`,
      );
    }
  }
  const index = new Map(names.map((name, ord) => [name, ord]));
  const rows = requests.map((request, ord) => jobInsertRow(ord, request, maxPayloadBytes, index));
  const parentOrds = new Set(rows.flatMap((row) => row.after_ords ?? []));
  for (const ord of parentOrds) {
    if (rows[ord]?.dedupe_key) {
      throw new InvalidOptionsError(`flow step ${names[ord]} has a dedupe key, but other steps wait for it`);
    }
  }
  // Depth-first, in step order: a step met again while its own parents are being walked closes a cycle.
  const state = new Array<0 | 1 | 2>(rows.length).fill(0);
  const visit = (ord: number, path: string[]): void => {
    if (state[ord] === 2) return;
    if (state[ord] === 1) {
      throw new InvalidOptionsError(`flow steps wait for each other in a cycle: ${[...path, names[ord]].join(' → ')}`);
    }
    state[ord] = 1;
    for (const parent of rows[ord]?.after_ords ?? []) visit(parent, [...path, names[ord] as string]);
    state[ord] = 2;
  };
  for (let ord = 0; ord < rows.length; ord++) visit(ord, []);
  return rows;
}

/** `row` waiting for its parents in this call by the ids they were written with. */
function withParentIds(row: JobInsertRow, results: readonly (EnqueueResult | undefined)[]): JobInsertRow {
  if (!row.after_ords) return row;
  const ids = row.after_ords.map((ord) => results[ord]?.id).filter((id): id is string => id !== undefined);
  return { ...row, after_ids: [...new Set([...(row.after_ids ?? []), ...ids])], after_ords: null };
}

/** What writing `row` did: a row that was not inserted replaced or was deduplicated, by its mode. */
function outcomeOf(row: JobInsertRow, inserted: boolean): EnqueueResult['outcome'] {
  if (inserted) return 'inserted';
  return row.dedupe_mode === 'replace' ? 'replaced' : 'deduplicated';
}

/**
 * Replace rows superseded by a later row with the same kind and key in the same call (ord →
 * the winner's ord): only the last is written, since one upsert may not touch a row twice.
 */
function supersededReplaceRows(rows: readonly JobInsertRow[]): Map<number, number> {
  const last = new Map<string, JobInsertRow>();
  const replaceRows = rows.filter((r) => r.dedupe_mode === 'replace');
  for (const row of replaceRows) last.set(`${row.kind}\u0000${row.dedupe_key}`, row);
  const supersededBy = new Map<number, number>();
  for (const row of replaceRows) {
    const winner = last.get(`${row.kind}\u0000${row.dedupe_key}`) as JobInsertRow;
    if (winner !== row) supersededBy.set(row.ord, winner.ord);
  }
  return supersededBy;
}
