import type { SQL } from 'drizzle-orm';
import type { z } from 'zod';
import {
  ConfigError,
  InvalidOptionsError,
  PayloadTooLargeError,
  PayloadValidationError,
  SkiplockError,
} from '../base/errors.js';
import { assertSchemaName, DEFAULT_SCHEMA } from '../base/identifiers.js';
import type { JobInsertRow } from '../base/rows.js';
import type { AnyPgDatabase, SkiplockDb } from '../db/connect.js';
import {
  findDedupeHolders,
  type InsertRow,
  insertJobs,
  insertJobsStatement,
  readInsertOutcomes,
} from '../db/statements/enqueue.js';
import { type EnqueueOptions, toInsertRow } from './enqueue-options.js';
import { issuesOf } from './issues.js';
import type { JobDefinition, JobRegistry, JobRequest } from './jobs.js';
import type { Nudger } from './nudge.js';
import { unstorableInJson } from './text.js';

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

/** Where enqueue writes: any Drizzle Postgres database or transaction, or a SkiplockDb. */
export type EnqueueTarget = AnyPgDatabase | SkiplockDb;

export interface Enqueuer {
  /** Enqueues one job, in `db`'s transaction when `db` is one. */
  enqueue<S extends z.ZodType>(
    db: EnqueueTarget,
    job: JobDefinition<S>,
    payload: z.input<S>,
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
   * Never rejects: a failed nudge is logged and the cron tick runs the jobs.
   */
  nudge(queues: Iterable<string>): Promise<void>;
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

  const enqueueMany = async (target: EnqueueTarget, requests: readonly JobRequest[]) => {
    // Validate everything before writing anything.
    const rows = requests.map((request, ord) => toRow(ord, request));
    if (rows.length === 0) return [];
    const nudged = rows.filter((row) => requests[row.ord]?.options?.nudge === true).map((row) => row.queue);
    if (nudged.length > 0 && !config.nudger) {
      throw new InvalidOptionsError('nudge: true needs a nudger: createEnqueuer({ nudger })');
    }
    const db = databaseOf(target);
    const results: (EnqueueResult | undefined)[] = new Array(rows.length);
    const supersededBy = supersededReplaceRows(rows);

    // Every row in one statement (replace upserts beside the other inserts), so a row the
    // database refuses leaves nothing written on any driver, with no transaction around it.
    let pending = rows.filter((r) => !supersededBy.has(r.ord));
    // A deduplicated row whose key holder finished before we could see it is simply
    // inserted on the next pass; three passes settle any realistic race.
    for (let pass = 0; pending.length > 0 && pass < 3; pass++) {
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
    if (nudged.length > 0) await config.nudger?.nudge(nudged);
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

  return {
    prepareEnqueue,
    nudge: async (queues) => config.nudger?.nudge(queues),
    enqueue: async (db, job, payload, options = {}) =>
      (await enqueueMany(db, [{ job, payload, options }]))[0] as EnqueueResult,
    enqueueMany,
    enqueueByKind: async (db, registry, kind, payload, options = {}) =>
      (await enqueueMany(db, [{ job: registry.get(kind), payload, options }]))[0] as EnqueueResult,
  };
}

const defaultEnqueuer = createEnqueuer();
/** enqueue() on the default `skiplock` schema with the default payload limit. */
export const enqueue = defaultEnqueuer.enqueue;
/** enqueueMany() on the default `skiplock` schema with the default payload limit. */
export const enqueueMany = defaultEnqueuer.enqueueMany;
/** enqueueByKind() on the default `skiplock` schema with the default payload limit. */
export const enqueueByKind = defaultEnqueuer.enqueueByKind;

/**
 * A request as the row to insert: the payload validated against the kind's schema, checked as
 * storable JSON of at most `maxPayloadBytes`, the options merged over the kind's defaults.
 */
export function jobInsertRow(ord: number, request: JobRequest, maxPayloadBytes: number): JobInsertRow {
  const { job } = request;
  const parsed = job.payloadSchema.safeParse(request.payload);
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
  return toInsertRow(ord, job, JSON.parse(json), request.options);
}

function databaseOf(target: EnqueueTarget): AnyPgDatabase {
  return 'driver' in target && 'interactiveTransactions' in target ? target.db : (target as AnyPgDatabase);
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
