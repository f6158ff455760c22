/**
 * Every error skiplock raises on purpose is a SkiplockError with a stable `code`,
 * so callers can branch on `err.code` and boundaries can map it to a status.
 */
export class SkiplockError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A schema, queue or kind name that is not allowed. */
export class InvalidIdentifierError extends SkiplockError {
  constructor(message: string) {
    super('invalid_identifier', message);
  }
}

/** Configuration that cannot work (bad option values, unsupported driver/mode pairs). */
export class ConfigError extends SkiplockError {
  constructor(message: string) {
    super('config_error', message);
  }
}

/** enqueue() was asked for a kind nobody defined. */
export class UnknownKindError extends SkiplockError {
  readonly kind: string;
  constructor(kind: string, known: readonly string[]) {
    super(
      'unknown_kind',
      `unknown job kind ${JSON.stringify(kind)}; known kinds: ${known.length ? known.join(', ') : '(none)'}`,
    );
    this.kind = kind;
  }
}

/** The payload does not match the kind's zod schema. Nothing was written. */
export class PayloadValidationError extends SkiplockError {
  readonly kind: string;
  readonly issues: readonly { path: string; message: string }[];
  constructor(kind: string, issues: readonly { path: string; message: string }[]) {
    const lines = issues.map((i) => `${i.path || '(payload)'}: ${i.message}`).join('; ');
    super('invalid_payload', `invalid payload for ${kind}: ${lines}`);
    this.kind = kind;
    this.issues = issues;
  }
}

/** The serialized payload exceeds the configured limit. Nothing was written. */
export class PayloadTooLargeError extends SkiplockError {
  readonly bytes: number;
  readonly limitBytes: number;
  constructor(kind: string, bytes: number, limitBytes: number) {
    super(
      'payload_too_large',
      `payload for ${kind} is ${bytes} bytes, over the ${limitBytes}-byte limit; store large data elsewhere and enqueue a reference`,
    );
    this.bytes = bytes;
    this.limitBytes = limitBytes;
  }
}

/** Enqueue or replay options that are out of range. Nothing was written. */
export class InvalidOptionsError extends SkiplockError {
  constructor(message: string) {
    super('invalid_options', message);
  }
}

/** The skiplock tables are missing: migrate() has not been run for this schema. */
export class NotMigratedError extends SkiplockError {
  constructor(schema: string) {
    super(
      'not_migrated',
      `skiplock schema "${schema}" is not migrated; run \`npx skiplock migrate\` (or migrate() from code) first`,
    );
  }
}

/**
 * The schema is older than this code: a column, function or table the code uses is missing. The
 * new code was deployed before its migration ran; migrate first, then deploy.
 */
export class SchemaOutdatedError extends SkiplockError {
  constructor(schema: string, missing: string) {
    super(
      'schema_outdated',
      `skiplock schema "${schema}" is older than this code (${missing}); run \`npx skiplock migrate\` with this version, then deploy. Migrate first, then deploy: the previous release runs on the new schema, the new release does not run on the old one`,
    );
  }
}

/** A migration step could not take its locks within lock_timeout, however often it was tried. */
export class MigrationLockTimeoutError extends SkiplockError {
  readonly tag: string;
  constructor(schema: string, tag: string, attempts: number, lockTimeoutMs: number) {
    super(
      'migration_lock_timeout',
      `migration ${tag} of skiplock schema "${schema}" could not take its locks within ${lockTimeoutMs} ms in ${attempts} attempts: a long transaction holds its tables (see pg_stat_activity). The step was rolled back; steps before it stay applied and the next run resumes after them. Run migrate again when the transaction has ended, or raise --lock-timeout`,
    );
    this.tag = tag;
  }
}

/**
 * The schema was migrated by a pre-release skiplock, whose migrations (0000_jobs … 0021) were
 * squashed into the 0.1.0 baseline; the baseline adds tables the chain never made, so such a
 * schema is not carried over.
 */
export class LegacyMigrationsError extends SkiplockError {
  constructor(schema: string, last: string, complete: boolean) {
    super(
      'legacy_migrations',
      `skiplock schema "${schema}" was migrated by a pre-release skiplock (${complete ? 'the whole chain, ' : ''}up to ${last}); those migrations were squashed into the 0.1.0 baseline, which has tables they never made, so nothing was migrated. Drop the schema (its jobs with it; export what you need to keep first) and run migrate again, or migrate into another schema (--schema)`,
    );
  }
}

/**
 * A migration this version ships was applied with other content: its file was edited after it
 * was applied. migrate() applies nothing rather than guess which version the schema reflects.
 */
export class MigrationMismatchError extends SkiplockError {
  readonly tag: string;
  constructor(schema: string, tag: string) {
    super(
      'migration_mismatch',
      `migration ${tag} in skiplock schema "${schema}" was applied with different content than this version ships (it was edited after it was applied); nothing was migrated. Restore the original migration and put the change in a new one`,
    );
    this.tag = tag;
  }
}

/** The schema was migrated by a newer skiplock: its journal holds a migration this version does not know. */
export class MigratedByNewerVersionError extends SkiplockError {
  readonly tag: string;
  constructor(schema: string, tag: string) {
    super(
      'migrated_by_newer_version',
      `skiplock schema "${schema}" was migrated by a newer version of skiplock (migration ${tag} is unknown to this one); nothing was migrated. Upgrade skiplock to the version that migrated it, or newer`,
    );
    this.tag = tag;
  }
}

/**
 * The schema holds skiplock's tables but no journal of skiplock's migrations (the Drizzle path made
 * it, or a person did), and it is not this version's schema, so migrate() cannot tell which
 * migrations it has. Nothing was written.
 */
export class UnjournaledSchemaError extends SkiplockError {
  /** What differs, as `migrate --check` names it. */
  readonly differences: readonly string[];
  constructor(schema: string, differences: readonly string[]) {
    const shown = differences.slice(0, 5).join('; ');
    const more = differences.length > 5 ? `; and ${differences.length - 5} more` : '';
    super(
      'unjournaled_schema',
      `skiplock schema "${schema}" holds skiplock's tables but no journal of skiplock's migrations (made by drizzle-kit or by hand), and it differs from this version's schema (${shown}${more}); nothing was written. To stay on the Drizzle path, generate this version's changes with drizzle-kit and \`npx skiplock migrate --print --objects\`, apply them and check with \`npx skiplock migrate --check\`. To hand the schema to \`skiplock migrate\`, run \`npx skiplock migrate\` first with the skiplock version your drizzle migrations were generated from: it records a schema that matches it. Then upgrade and run migrate again`,
    );
    this.differences = differences;
  }
}

/**
 * A migration step failed on a statement the database rejected (a permission, an object that is
 * already there, a statement timeout): the server answered, so this is not a connection failure.
 */
export class MigrationFailedError extends SkiplockError {
  readonly tag: string;
  readonly sqlState: string | undefined;
  constructor(
    schema: string,
    where: { tag: string; step: number; of: number },
    failure: { message: string; sqlState: string | undefined },
  ) {
    const conflict = failure.sqlState !== undefined && ALREADY_EXISTS.has(failure.sqlState);
    super(
      'migration_failed',
      `migration ${where.tag} of skiplock schema "${schema}" failed at step ${where.step} of ${where.of}: ${failure.message}${failure.sqlState ? ` (SQLSTATE ${failure.sqlState})` : ''}. That step was rolled back (an index it was building is dropped and built again by the next run); the steps before it stay applied and the next run resumes at it.${conflict ? ' The schema already holds an object this migration creates: it was changed outside `skiplock migrate` (by drizzle-kit or by hand). See what differs with `npx skiplock migrate --check`' : ''}`,
    );
    this.tag = where.tag;
    this.sqlState = failure.sqlState;
  }
}

/** SQLSTATEs of an object that already exists (duplicate table, object, column, function, schema). */
const ALREADY_EXISTS = new Set(['42P07', '42710', '42701', '42723', '42P06']);

/**
 * A database failure, with the driver's message scrubbed of connection strings and
 * passwords. `sqlState` is the SQLSTATE when the server sent one.
 */
export class DatabaseError extends SkiplockError {
  readonly sqlState: string | undefined;
  constructor(message: string, sqlState: string | undefined, code = 'database_error') {
    super(code, message);
    this.sqlState = sqlState;
  }
}

/**
 * The statement never reached the database: the connection was refused, could not be opened in
 * time, or its login failed. Nothing was written; sending it again is safe.
 */
export class DatabaseUnreachableError extends DatabaseError {
  constructor(message: string, sqlState?: string) {
    super(`cannot reach the database: ${message}`, sqlState, 'database_unreachable');
  }
}

/**
 * The connection failed after the statement was sent and before its answer came back (reset,
 * timed out, an HTTP error from Neon's endpoint): it may have committed or not. Inside a
 * transaction of yours it did not commit (your commit fails). On its own it may have: read what it
 * wrote before you repeat it, or repeat it only where repeating is safe — an enqueue with a dedupe
 * key returns the job the first one made (see kinds-and-enqueue.md, "When the answer is lost").
 */
export class OutcomeUnknownError extends DatabaseError {
  constructor(message: string) {
    super(
      `the connection failed after the statement was sent (${message}); it may have committed. Repeating it is safe for an enqueue with a dedupe key (it returns the job the first one made); without one, check before you repeat it`,
      undefined,
      'outcome_unknown',
    );
  }
}

/**
 * A statement was still unanswered when the invocation had to return. The invocation stops waiting
 * for it so the function ends before its platform kills it; what it was writing is safe either
 * way (it commits, or the leases run out and the jobs are rescued).
 */
export class InvocationDeadlineError extends SkiplockError {
  constructor() {
    super(
      'invocation_deadline',
      "the database had not answered by the invocation's deadline; unconfirmed outcomes are safe (their leases expire and the jobs are rescued)",
    );
  }
}

// ---- Errors a job handler throws to steer what happens next -------------------

export interface HttpResponseInfo {
  status: number;
  body?: string;
}

interface HandlerErrorOptions {
  cause?: unknown;
  /** The failing HTTP response, kept in the job's error record (body truncated). */
  response?: HttpResponseInfo;
}

/** Retry with the kind's backoff. Throwing anything that is not a skiplock error does the same. */
export class RetryError extends SkiplockError {
  readonly response: HttpResponseInfo | undefined;
  constructor(message: string, options: HandlerErrorOptions = {}) {
    super('retry', message, options);
    this.response = options.response;
  }
}

/** Retry after an explicit delay (e.g. a 429's Retry-After), ignoring the backoff curve. */
export class RetryAfterError extends SkiplockError {
  readonly delayMs: number;
  readonly response: HttpResponseInfo | undefined;
  constructor(delayMs: number, message: string, options: HandlerErrorOptions = {}) {
    super('retry_after', message, options);
    this.delayMs = Math.max(0, Math.round(delayMs));
    this.response = options.response;
  }
}

/**
 * The destination failed (it is down, unreachable, answering garbage): retried with the kind's
 * backoff like a RetryError, and counted against the destination's circuit breaker. 5xx answers,
 * timeouts and connection errors count without it; throw it for what skiplock cannot see (a 200
 * with an error page, a partner's maintenance flag). `destination` names another destination than
 * the job's (@defaultValue the job's destination).
 */
export class DestinationError extends RetryError {
  readonly destination: string | undefined;
  constructor(message: string, options: HandlerErrorOptions & { destination?: string } = {}) {
    super(message, options);
    this.destination = options.destination;
  }
}

/**
 * Permanent failure: the job goes to the dead-letter queue at once, without retries.
 * `reason` classifies it in the DLQ (e.g. `http_4xx`, `validation_error`).
 */
export class DiscardError extends SkiplockError {
  readonly reason: string;
  readonly response: HttpResponseInfo | undefined;
  constructor(message: string, options: HandlerErrorOptions & { reason?: string } = {}) {
    super('discard', message, options);
    this.reason = options.reason ?? (options.response ? httpReason(options.response.status) : 'discarded');
    this.response = options.response;
  }
}

/**
 * Why a job's code cannot go on with its durable steps: a name used twice, steps reached in another
 * order than the recorded one (the code changed under a running job), too many steps, a bad name,
 * a step out of attempts. The job goes to the DLQ with `reason`.
 */
export class StepError extends DiscardError {
  constructor(
    reason:
      | 'step_name_reused'
      | 'step_order_changed'
      | 'too_many_steps'
      | 'invalid_step'
      | 'step_failed'
      | 'step_too_long'
      | 'step_unsupported',
    message: string,
  ) {
    super(message, { reason });
    this.name = 'StepError';
  }
}

/**
 * Thrown into a handler by `ctx.step` or `ctx.sleep` when its job has left the invocation (a
 * continuation, a sleep, a step's retry): the job is already back in the queue and resumes in a
 * later invocation. A handler that catches errors around a step must let it through.
 */
export class StepSuspension extends Error {
  readonly why: 'continued' | 'sleeping' | 'waiting' | 'retrying';
  constructor(why: StepSuspension['why']) {
    super(`the job left this invocation (${why}); it resumes in a later one`);
    this.name = 'StepSuspension';
    this.why = why;
  }
}

/**
 * A signal callback token that cannot be used: not one this secret signed (`invalid_signal_token`),
 * past its expiry (`signal_token_expired`), or already used (`signal_token_used`). Nothing was sent.
 */
export class SignalTokenError extends SkiplockError {
  constructor(code: 'invalid_signal_token' | 'signal_token_expired' | 'signal_token_used', message: string) {
    super(code, message);
  }
}

/** The job should not run any more: it ends `cancelled`, not dead. */
export class CancelError extends SkiplockError {
  constructor(message = 'cancelled by handler') {
    super('cancel', message);
  }
}

function httpReason(status: number): string {
  if (status >= 400 && status < 500) return 'http_4xx';
  if (status >= 500) return 'http_5xx';
  return 'discarded';
}

/**
 * A batch handler's answer left a job without an outcome (`batch_outcome_missing`), or was not a
 * list of outcomes made by its jobs (`batch_answer_invalid`): the job is retried with its backoff.
 */
export class BatchAnswerError extends SkiplockError {
  constructor(code: 'batch_outcome_missing' | 'batch_answer_invalid', message: string) {
    super(code, message);
  }
}
