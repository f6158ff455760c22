import * as z from 'zod/mini';
import { InvalidIdentifierError, InvalidOptionsError } from '../base/errors.js';
import { assertLabel } from '../base/identifiers.js';
import type { JobInsertRow } from '../base/rows.js';
import { MAX_DESTINATION_LENGTH } from './destinations.js';
import { check, describeIssues } from './issues.js';

export type DedupeOption =
  /** An active (queued or running) job with this key exists → return it, insert nothing. */
  | { key: string; mode?: 'skip' }
  /** A waiting job with this key exists → update its payload, run_at, priority ("latest state wins"). */
  | { key: string; mode: 'replace' }
  /** One job per key per `windowMs` period (aligned to the epoch), whatever its state. */
  | { key: string; mode: 'window'; windowMs: number };

export interface EnqueueOptions {
  /** @defaultValue the kind's queue */
  queue?: string;
  /** Lower runs first, -1000..1000. @defaultValue the kind's priority */
  priority?: number;
  /** Earliest time to run. Mutually exclusive with delayMs. @defaultValue now (database clock) */
  runAt?: Date;
  /** Run after this many milliseconds, measured on the database clock. */
  delayMs?: number;
  /** @defaultValue the kind's maxAttempts */
  maxAttempts?: number;
  /** Not worth running after this time: the job goes to the DLQ as `deadline_exceeded`. */
  deadline?: Date;
  dedupe?: DedupeOption;
  /** Carried into logs and the DLQ, e.g. the request id that caused the job. */
  correlationId?: string;
  /**
   * At most one job per key runs at a time, in enqueue order (1-255 characters). @defaultValue the
   * kind's `orderingKey(payload)`, else none
   */
  orderingKey?: string;
  /**
   * The job's concurrency key, e.g. a tenant (1-255 characters): keyed jobs are claimed key by key
   * (fair share), and the queue's per-key limit caps the running jobs of each key. @defaultValue
   * the kind's `concurrencyKey(payload)`, else none
   */
  concurrencyKey?: string;
  /**
   * The job's destination, e.g. a partner's host (1-200 characters): while its circuit breaker is
   * open or a Retry-After defers it, the job is not claimed. @defaultValue the kind's
   * `destination(payload)`, else none
   */
  destination?: string;
  /**
   * Start a worker for the job's queue as soon as this call returns, through the enqueuer's
   * nudger (`createEnqueuer({ nudger })`). Only for calls outside a transaction: inside one, the
   * job is not claimable before the commit, so call `nudge()` after it. @defaultValue false
   */
  nudge?: boolean;
  /**
   * Run only after these jobs completed: their ids (or what enqueue returned for them; in
   * `enqueueFlow`, also the names of other steps), at most 1,000. Until then the job waits (status
   * `waiting`), claimed by no one; the last parent's completion releases it, and the handler reads
   * the parents' results with `ctx.parents()`. An id that names no job counts as completed (a
   * completed job deleted by `completedJobs: 'delete'` or retention leaves no row). Not with runAt,
   * delayMs, an ordering key or dedupe mode 'replace'. @defaultValue none
   */
  after?: readonly (string | { id: string })[];
  /**
   * What a parent's death or cancellation does to this job: 'cancel' — it is cancelled as
   * `dependency_failed`, and so are the jobs waiting for it (replaying the parent brings them
   * back) — or 'run': it runs once its other parents are done. @defaultValue 'cancel'
   */
  onParentFailure?: 'cancel' | 'run';
}

/** At most this many parents per job. */
export const MAX_PARENTS = 1000;
const JOB_ID = /^[1-9][0-9]{0,18}$/;

const MAX_DELAY_MS = 366 * 24 * 3_600_000;
/**
 * Dedupe windows may be far longer than any delay: a window longer than the epoch so far (the
 * periods are aligned to it) is one period, so its key holds one job for as long as that job's row
 * is kept — what makes an enqueue retried after a lost answer safe (see "When the answer is lost").
 */
const MAX_WINDOW_MS = 1_000 * 365 * 24 * 3_600_000;
const MAX_PAST_RUN_AT_MS = 24 * 3_600_000;

/**
 * The options' schema, built on first use rather than at import: a function that never enqueues
 * (a worker whose handlers enqueue nothing, the console) does not pay for it at cold start.
 */
let optionsSchemaBuilt: ReturnType<typeof buildOptionsSchema> | undefined;
const optionsSchema = () => {
  optionsSchemaBuilt ??= buildOptionsSchema();
  return optionsSchemaBuilt;
};

function buildOptionsSchema() {
  const text = (min: number, max: number) => z.string().check(z.minLength(min), z.maxLength(max));
  const int = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));
  return z
    .strictObject({
      queue: z.optional(z.string()),
      priority: z.optional(int(-1000, 1000)),
      runAt: z.optional(z.date()),
      delayMs: z.optional(int(0, MAX_DELAY_MS)),
      maxAttempts: z.optional(int(1, 1000)),
      deadline: z.optional(z.date()),
      dedupe: z.optional(
        z.union([
          z.strictObject({ key: text(1, 255), mode: z.optional(z.literal('skip')) }),
          z.strictObject({ key: text(1, 255), mode: z.literal('replace') }),
          z.strictObject({ key: text(1, 255), mode: z.literal('window'), windowMs: int(1, MAX_WINDOW_MS) }),
        ]),
      ),
      correlationId: z.optional(z.string().check(z.maxLength(255))),
      orderingKey: z.optional(text(1, 255)),
      concurrencyKey: z.optional(text(1, 255)),
      destination: z.optional(text(1, MAX_DESTINATION_LENGTH)),
      nudge: z.optional(z.boolean()),
      after: z.optional(
        z.array(z.union([z.string(), z.looseObject({ id: z.string() })])).check(z.maxLength(MAX_PARENTS)),
      ),
      onParentFailure: z.optional(z.enum(['cancel', 'run'])),
    })
    .check(
      z.refine((o) => o.runAt === undefined || o.delayMs === undefined, {
        message: 'give runAt or delayMs, not both',
      }),
    );
}

export interface KindDefaults {
  kind: string;
  queue: string;
  priority: number;
  maxAttempts: number;
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  orderingKey?: ((payload: any) => string | undefined) | undefined;
  orderingOnDead?: 'continue' | 'hold';
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  concurrencyKey?: ((payload: any) => string | undefined) | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  destination?: ((payload: any) => string | undefined) | undefined;
  /** Set for a batch kind (defineBatchJob): its jobs take no ordering key. */
  batch?: object | undefined;
}

/** The key an option names, else the kind's function of the payload; a problem is pushed when it fails. */
function keyOf(
  name: 'orderingKey' | 'concurrencyKey' | 'destination',
  given: string | undefined,
  // biome-ignore lint/suspicious/noExplicitAny: the validated payload of any kind.
  fromPayload: ((payload: any) => string | undefined) | undefined,
  payload: () => unknown,
  problems: string[],
): string | undefined {
  let key: string | undefined;
  try {
    key = given ?? (fromPayload ? fromPayload(payload()) : undefined);
  } catch (err) {
    problems.push(`the kind's ${name}(payload) threw: ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
  const max = name === 'destination' ? MAX_DESTINATION_LENGTH : 255;
  if (key !== undefined && !(typeof key === 'string' && key.length >= 1 && key.length <= max)) {
    problems.push(`the kind's ${name}(payload) must return a string of 1-${max} characters`);
    return undefined;
  }
  return key;
}

/**
 * The options checked against their schema. No options (undefined, or a plain object with no keys,
 * what most enqueues pass) are the empty options without a schema check: at 1,000 jobs a batch,
 * the check was a tenth of the enqueue's CPU.
 */
function checkedOptions(
  kind: KindDefaults,
  options: EnqueueOptions | undefined,
): z.infer<ReturnType<typeof optionsSchema>> {
  if (options === undefined || options === null) return {};
  if (Object.getPrototypeOf(options) === Object.prototype && isEmpty(options)) return {};
  const parsed = check(optionsSchema(), options);
  if (!parsed.success) {
    throw new InvalidOptionsError(
      `invalid enqueue options for ${kind.kind}: ${describeIssues(parsed.error, 'options')}`,
    );
  }
  return parsed.data;
}

function isEmpty(object: object): boolean {
  for (const _ in object) return false;
  return true;
}

/**
 * Validates options (every problem in one message) and merges them over the kind's defaults.
 * `steps`: in a flow, the names of its steps (name → ord), which `after` may name.
 */
export function toInsertRow(
  ord: number,
  kind: KindDefaults,
  payloadJson: string,
  options: EnqueueOptions,
  steps?: ReadonlyMap<string, number>,
): JobInsertRow {
  const o = checkedOptions(kind, options);
  for (const date of [o.runAt, o.deadline]) {
    if (date && Number.isNaN(date.getTime())) {
      throw new InvalidOptionsError(`invalid enqueue options for ${kind.kind}: invalid date`);
    }
  }
  // Sanity bounds on dates, against unit mix-ups (seconds for milliseconds) and typos; the
  // database clock still decides when a job is due.
  const now = Date.now();
  const problems: string[] = [];
  if (o.runAt && o.runAt.getTime() < now - MAX_PAST_RUN_AT_MS) {
    problems.push('runAt is more than 24 hours in the past (seconds passed as milliseconds?)');
  }
  if (o.runAt && o.runAt.getTime() > now + MAX_DELAY_MS) problems.push('runAt is more than 366 days ahead');
  if (o.deadline && o.deadline.getTime() <= now) problems.push('deadline has already passed');
  const start = o.runAt?.getTime() ?? now + (o.delayMs ?? 0);
  if (o.deadline && o.deadline.getTime() <= start) problems.push('deadline is not after the time the job would run');
  // The kinds' key functions see the payload as it is stored: parsed back from its JSON, once.
  let stored: unknown;
  const payload = () => {
    stored ??= JSON.parse(payloadJson);
    return stored;
  };
  // A batch runs jobs of many keys at once: per-key order cannot hold across it.
  if (kind.batch && o.orderingKey !== undefined) {
    problems.push('a batch kind takes no orderingKey (per-key order cannot hold across a batch)');
  }
  const orderingKey = kind.batch ? undefined : keyOf('orderingKey', o.orderingKey, kind.orderingKey, payload, problems);
  const concurrencyKey = keyOf('concurrencyKey', o.concurrencyKey, kind.concurrencyKey, payload, problems);
  const destination = keyOf('destination', o.destination, kind.destination, payload, problems);
  // A replace would rewrite a parked follower's run_at and release it ahead of its turn; a delay
  // would reorder the key (as in SQS FIFO, where messages of a group have no delay of their own).
  if (orderingKey !== undefined && o.dedupe?.mode === 'replace') {
    problems.push("an ordering key cannot be combined with dedupe mode 'replace'");
  }
  if (orderingKey !== undefined && (o.runAt !== undefined || o.delayMs !== undefined)) {
    problems.push('an ordering key cannot be combined with runAt or delayMs');
  }
  const parents = parentsOf(o.after, steps, problems);
  if (parents) {
    if (o.runAt !== undefined || o.delayMs !== undefined)
      problems.push('after cannot be combined with runAt or delayMs');
    if (orderingKey !== undefined) problems.push('after cannot be combined with an ordering key');
    if (o.dedupe?.mode === 'replace') problems.push("after cannot be combined with dedupe mode 'replace'");
  } else if (o.onParentFailure !== undefined) {
    problems.push('onParentFailure needs after');
  }
  if (problems.length > 0) {
    throw new InvalidOptionsError(`invalid enqueue options for ${kind.kind}: ${problems.join('; ')}`);
  }
  let queue = kind.queue;
  if (o.queue !== undefined) {
    try {
      queue = assertLabel('queue', o.queue);
    } catch (err) {
      if (err instanceof InvalidIdentifierError) throw new InvalidOptionsError(err.message);
      throw err;
    }
  }
  return {
    ord,
    kind: kind.kind,
    queue,
    payload_json: payloadJson,
    priority: o.priority ?? kind.priority,
    run_at: o.runAt ? o.runAt.toISOString() : null,
    delay_ms: o.delayMs ?? null,
    max_attempts: o.maxAttempts ?? kind.maxAttempts,
    deadline: o.deadline ? o.deadline.toISOString() : null,
    dedupe_key: o.dedupe?.key ?? null,
    dedupe_mode: o.dedupe ? (o.dedupe.mode ?? 'skip') : null,
    window_ms: o.dedupe?.mode === 'window' ? o.dedupe.windowMs : null,
    correlation_id: o.correlationId ?? null,
    ordering_key: orderingKey ?? null,
    ordering_hold: orderingKey !== undefined && kind.orderingOnDead === 'hold',
    concurrency_key: concurrencyKey ?? null,
    destination: destination ?? null,
    ...(parents
      ? {
          after_ids: parents.ids.length > 0 ? parents.ids : null,
          after_ords: parents.ords.length > 0 ? parents.ords : null,
          on_parent_failure: o.onParentFailure ?? 'cancel',
        }
      : {}),
  };
}

/** `after` as job ids and flow steps (ords), without repeats; null when it names none. */
function parentsOf(
  after: readonly (string | { id: string })[] | undefined,
  steps: ReadonlyMap<string, number> | undefined,
  problems: string[],
): { ids: string[]; ords: number[] } | null {
  if (!after || after.length === 0) return null;
  const ids = new Set<string>();
  const ords = new Set<number>();
  for (const entry of after) {
    const name = typeof entry === 'string' ? entry : entry.id;
    const step = steps?.get(name);
    if (step !== undefined) ords.add(step);
    else if (JOB_ID.test(name)) ids.add(name);
    else {
      const what = steps ? 'a job id or the name of another step' : 'a job id';
      problems.push(`after: ${JSON.stringify(name.slice(0, 40))} is not ${what}`);
    }
  }
  return { ids: [...ids], ords: [...ords] };
}
