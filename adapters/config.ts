import * as z from 'zod/mini';
import { ConfigError } from '../base/errors.js';
import { ENQUEUE_DEFAULTS } from '../core/enqueue.js';
import { check } from '../core/issues.js';
import { MAINTENANCE_DEFAULTS } from '../core/maintenance.js';
import { WORKER_DEFAULTS } from '../core/worker/index.js';
import { CONNECT_DEFAULTS, type NeonOptions } from '../db/connection-options.js';
import { DRIVERS, type Driver } from '../db/drivers/names.js';

/** Settings of a deployed skiplock function, read from the environment. */
export interface SkiplockConfig {
  /** DATABASE_URL; absent when the URL comes from Secrets Manager. */
  databaseUrl: string | undefined;
  /** DATABASE_SECRET_ID: a Secrets Manager secret id or ARN holding the URL or its parts. */
  databaseSecretId: string | undefined;
  driver: Driver;
  /**
   * Where Neon's driver connects when not to Neon (SKIPLOCK_NEON_WS_PROXY on neon-ws,
   * SKIPLOCK_NEON_FETCH_ENDPOINT on neon-http); undefined: Neon's own endpoints.
   */
  neon: NeonOptions | undefined;
  schema: string;
  queues: string[] | undefined;
  kinds: string[] | undefined;
  concurrency: number;
  /** SKIPLOCK_MAX_INVOCATIONS: at most this many invocations of this worker at once, and fan-out up to it. */
  maxInvocations: number | undefined;
  /** The name invocations are counted under. */
  workerName: string;
  fanOutTargetMs: number;
  /** SKIPLOCK_LINGER_MS: keep looking this long after the queue ran dry. */
  lingerMs: number;
  /**
   * SKIPLOCK_IDLE: an idle worker or maintenance tick does not query the database until something
   * is due (docs/cost.md); false: every tick queries it.
   */
  idle: boolean;
  /**
   * SKIPLOCK_IDLE_RECHECK_MINUTES: with `idle`, the database is asked at least this often anyway — the
   * longest a job written without skiplock's enqueue (raw SQL, another service) waits.
   */
  idleRecheckMs: number;
  batchSize: number | undefined;
  safetyMarginMs: number;
  leaseGraceMs: number;
  completedJobs: 'keep' | 'delete';
  maxDurationMs: number;
  secretTtlMs: number;
  poolMax: number;
  statementTimeoutMs: number;
  queryTimeoutMs: number;
  /** SKIPLOCK_PREPARED_STATEMENTS: pg sends the claim and the settle as named prepared statements. */
  preparedStatements: boolean;
  maxBodyBytes: number;
  /** SKIPLOCK_NUDGE_FUNCTIONS: the worker function of each queue, started after an HTTP or invoked enqueue. */
  nudgeFunctions: Record<string, string> | undefined;
  /** SKIPLOCK_NUDGE_ROUTES: the worker route of each queue (a path or an absolute URL), requested after a Vercel enqueue. */
  nudgeRoutes: Record<string, string> | undefined;
  /**
   * SKIPLOCK_WAKE_ROLE_ARN: on Lambda with `idle`, the role EventBridge Scheduler invokes one-off
   * wake-ups with; unset: no wake-up is armed and only the fixed schedule runs the functions.
   */
  wakeRoleArn: string | undefined;
  /** SKIPLOCK_WAKE_GROUP: the EventBridge Scheduler group of the wake-ups; unset: `default`. */
  wakeGroup: string | undefined;
  /** SKIPLOCK_MAINTENANCE_FUNCTION: the maintenance function a busy Lambda worker wakes; unset: none. */
  maintenanceFunction: string | undefined;
  /**
   * SKIPLOCK_BASE_URL: where nudges and fan-out request the routes, else at the request's own origin;
   * its origin and path (no credentials, query or trailing slash). Vercel requests route paths at its
   * origin; a one-script platform below its path too (Supabase: `https://<project>.supabase.co/functions/v1`).
   */
  baseUrl: string | undefined;
  maxPayloadBytes: number;
  completedRetentionHours: number;
  deadRetentionHours: number;
  /** SKIPLOCK_EVENT_RETENTION_HOURS: events (and which subscriber got each) are kept this long. */
  eventRetentionHours: number;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** 'emf': CloudWatch Embedded Metric Format lines after each invocation and maintenance tick. */
  metrics: 'none' | 'emf';
  /** Name of this deployment in metrics (the Service dimension). */
  serviceName: string;
  /** SKIPLOCK_CONSOLE_READ_ONLY: the console shows everything and changes nothing, whoever logs in. */
  consoleReadOnly: boolean;
  /** SKIPLOCK_CONSOLE_SESSION_MINUTES: how long a console login lasts. */
  consoleSessionMinutes: number;
}

const QUEUE_OR_ANY = /^(\*|[A-Za-z0-9][A-Za-z0-9_.:-]{0,63})$/;
const FUNCTION_NAME = /^[A-Za-z0-9_:.-]{1,140}$/;
/** An IAM role's ARN (with its path). */
const ROLE_ARN = /^arn:aws[a-z-]*:iam::\d{12}:role\/[A-Za-z0-9+=,.@_/-]{1,512}$/;
/** `host:port` or `host:port/path`, optionally after `ws://` or `wss://` (a bare one is ws://). */
const WS_PROXY =
  /^(?:(wss?):\/\/)?((?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})(\/[A-Za-z0-9_.~/-]*)?$/;
/** A route's path (`/api/worker`) or an absolute http(s) URL, without `;`, `,` or `=`. */
const ROUTE = /^(\/[A-Za-z0-9_.~/-]*|https?:\/\/[^\s;,=]{1,2000})$/;

/**
 * `emails,webhooks=fn-a;reports=fn-b` → { emails: 'fn-a', webhooks: 'fn-a', reports: 'fn-b' }
 * (each target matching `target`: a function's name, a route); `*` names every other queue.
 * Undefined when the text does not read that way.
 */
function parseQueueTargets(text: string, target: RegExp): Record<string, string> | undefined {
  const functions: Record<string, string> = {};
  for (const part of text.split(';')) {
    const [queues, name, extra] = part.split('=');
    if (queues === undefined || name === undefined || extra !== undefined || !target.test(name)) return undefined;
    for (const queue of queues.split(',')) {
      if (!QUEUE_OR_ANY.test(queue)) return undefined;
      functions[queue] = name;
    }
  }
  return functions;
}

/** Defaults of the settings only deployed functions have (the rest are the library's own). */
export const FUNCTION_DEFAULTS = {
  /** The time budget where the platform gives none (Vercel routes pass their maxDuration). */
  maxDurationMs: 60_000,
  /** How long a secret fetched from Secrets Manager is reused by a warm container. */
  secretTtlMs: 300_000,
  /** The largest HTTP body an enqueue or replay route reads (413 above). */
  maxBodyBytes: 1_048_576,
  logLevel: 'info',
  metrics: 'none',
  /** How long a console login lasts. */
  consoleSessionMinutes: 480,
  /** An idle tick leaves the database alone until something is due. */
  idle: true,
  /** With idle on, the database is asked at least this often (un-nudged writes wait at most this). */
  idleRecheckMinutes: 360,
} as const;

/** `fn` on the raw value, then `schema` (what zod's preprocess does). */
const before = <S extends z.ZodMiniType>(fn: (v: unknown) => unknown, schema: S) => z.pipe(z.transform(fn), schema);
const int = (min: number, max: number) =>
  before(
    (v) => (v === undefined || v === '' ? undefined : Number(v)),
    z
      .int({ error: `must be a whole number from ${min} to ${max}` })
      .check(z.gte(min, `must be at least ${min}`), z.lte(max, `must be at most ${max}`)),
  );
const withDefault = <S extends z.ZodMiniType>(schema: S, value: z.output<S>) => z._default(schema, value as never);
const name = (message: string) => z.string().check(z.regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, message));
const list = before(
  (v) =>
    typeof v === 'string' && v.trim() !== ''
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : undefined,
  z.optional(z.array(name('must be a comma-separated list of names'))),
);
/** `queue,queue=target;queue=target` read into a map, or one readable problem. */
const queueTargets = (target: RegExp, shape: string) =>
  before(
    (v) => (v === '' ? undefined : v),
    z.optional(
      z.pipe(
        z.string(),
        z.transform((text: string, ctx) => {
          const targets = parseQueueTargets(text, target);
          if (!targets) ctx.issues.push({ code: 'custom', message: `must read ${shape}`, input: text });
          return targets ?? {};
        }),
      ),
    ),
  );
const optionalText = (max: number) =>
  before((v) => (v === '' ? undefined : v), z.optional(z.string().check(z.maxLength(max))));
const flag = (whenUnset: boolean) =>
  z.pipe(
    z.optional(z.enum(['true', 'false', '1', '0', ''], { error: 'must be true or false' })),
    z.transform((v) => (v === undefined || v === '' ? whenUnset : v === 'true' || v === '1')),
  );

/**
 * Every variable with its default, each validated on its own: a bad value disables only the
 * functions that read it. The defaults are the library's own (WORKER_DEFAULTS, …), never restated.
 * zod/mini, as the app's kinds may be: the deployed functions bundle it in a sixth of zod's size.
 */
const VARIABLES = {
  DATABASE_URL: optionalText(8192),
  DATABASE_SECRET_ID: optionalText(2048),
  SKIPLOCK_DRIVER: withDefault(
    z.enum(DRIVERS, { error: `must be one of ${DRIVERS.join(', ')}` }),
    CONNECT_DEFAULTS.driver,
  ),
  SKIPLOCK_NEON_WS_PROXY: before(
    (v) => (v === '' ? undefined : v),
    z.optional(
      z.pipe(
        z.string(),
        z.transform((text: string, ctx): NeonOptions => {
          const match = WS_PROXY.exec(text);
          if (!match || Number(match[3]) > 65_535) {
            const message =
              'must be host:port or host:port/path, optionally after ws:// or wss:// (such as 127.0.0.1:4444/v1)';
            ctx.issues.push({ code: 'custom', message, input: text });
            return {};
          }
          // A proxy of one's own (the local stand-in, or Neon's wsproxy beside a Postgres) relays plain
          // Postgres: no TLS inside the socket, no pipelined startup, and no coalescing, which adds
          // ~1 ms to every query. Neon's driver appends `?address=host:port` to the string.
          return {
            wsProxy: text.slice(match[1] ? match[1].length + 3 : 0),
            useSecureWebSocket: match[1] === 'wss',
            pipelineTLS: false,
            pipelineConnect: false,
            coalesceWrites: false,
          };
        }),
      ),
    ),
  ),
  SKIPLOCK_NEON_FETCH_ENDPOINT: before(
    (v) => (v === '' ? undefined : v),
    z.optional(
      z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL such as http://127.0.0.1:4445/sql' }),
    ),
  ),
  SKIPLOCK_SCHEMA: withDefault(
    z.string().check(z.regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case identifier')),
    ENQUEUE_DEFAULTS.schema,
  ),
  SKIPLOCK_QUEUES: list,
  SKIPLOCK_KINDS: list,
  SKIPLOCK_CONCURRENCY: withDefault(int(1, 1000), WORKER_DEFAULTS.concurrency),
  SKIPLOCK_BATCH_SIZE: z.optional(int(1, 1000)),
  SKIPLOCK_MAX_INVOCATIONS: z.optional(int(1, 1000)),
  SKIPLOCK_WORKER_NAME: z.optional(name('must be a name of letters, digits and _ . : -')),
  SKIPLOCK_FAN_OUT_TARGET_MS: withDefault(int(100, 900_000), WORKER_DEFAULTS.fanOutTargetMs),
  SKIPLOCK_LINGER_MS: withDefault(int(0, 900_000), WORKER_DEFAULTS.lingerMs),
  SKIPLOCK_IDLE: flag(FUNCTION_DEFAULTS.idle),
  SKIPLOCK_IDLE_RECHECK_MINUTES: withDefault(int(1, 10_080), FUNCTION_DEFAULTS.idleRecheckMinutes),
  SKIPLOCK_SAFETY_MARGIN_MS: withDefault(int(0, 600_000), WORKER_DEFAULTS.safetyMarginMs),
  SKIPLOCK_LEASE_GRACE_MS: withDefault(int(0, 3_600_000), WORKER_DEFAULTS.leaseGraceMs),
  SKIPLOCK_COMPLETED_JOBS: withDefault(z.enum(['keep', 'delete']), WORKER_DEFAULTS.completedJobs),
  SKIPLOCK_MAX_DURATION_MS: withDefault(int(1_000, 900_000), FUNCTION_DEFAULTS.maxDurationMs),
  SKIPLOCK_SECRET_TTL_MS: withDefault(int(0, 86_400_000), FUNCTION_DEFAULTS.secretTtlMs),
  SKIPLOCK_POOL_MAX: withDefault(int(1, 100), CONNECT_DEFAULTS.max),
  SKIPLOCK_STATEMENT_TIMEOUT_MS: withDefault(int(0, 3_600_000), CONNECT_DEFAULTS.statementTimeoutMs),
  SKIPLOCK_QUERY_TIMEOUT_MS: withDefault(int(0, 3_600_000), CONNECT_DEFAULTS.queryTimeoutMs),
  SKIPLOCK_PREPARED_STATEMENTS: flag(CONNECT_DEFAULTS.preparedStatements),
  SKIPLOCK_MAX_BODY_BYTES: withDefault(int(1_024, 6_291_456), FUNCTION_DEFAULTS.maxBodyBytes),
  SKIPLOCK_WAKE_ROLE_ARN: before(
    (v) => (v === '' ? undefined : v),
    z.optional(z.string().check(z.regex(ROLE_ARN, 'must be an IAM role ARN (arn:aws:iam::123456789012:role/name)'))),
  ),
  SKIPLOCK_WAKE_GROUP: before(
    (v) => (v === '' ? undefined : v),
    z.optional(
      z.string().check(z.regex(/^[0-9A-Za-z_.-]{1,64}$/, 'must be a schedule group name (letters, digits, _ . -)')),
    ),
  ),
  SKIPLOCK_MAINTENANCE_FUNCTION: before(
    (v) => (v === '' ? undefined : v),
    z.optional(z.string().check(z.regex(FUNCTION_NAME, "must be a Lambda function's name or ARN"))),
  ),
  SKIPLOCK_NUDGE_FUNCTIONS: queueTargets(FUNCTION_NAME, 'queue,queue=function;queue=function'),
  SKIPLOCK_NUDGE_ROUTES: queueTargets(ROUTE, 'queue,queue=/route/path;queue=https://host/path'),
  SKIPLOCK_BASE_URL: before(
    (v) => (v === '' ? undefined : v),
    z.optional(
      z.pipe(
        z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL such as https://my-app.example.com' }),
        z.transform((url: string) => {
          const { origin, pathname } = new URL(url);
          return `${origin}${pathname.replace(/\/+$/, '')}`;
        }),
      ),
    ),
  ),

  SKIPLOCK_MAX_PAYLOAD_BYTES: withDefault(int(1, 6_291_456), ENQUEUE_DEFAULTS.maxPayloadBytes),
  SKIPLOCK_COMPLETED_RETENTION_HOURS: withDefault(
    int(0, 87_600),
    MAINTENANCE_DEFAULTS.completedRetentionMs / 3_600_000,
  ),
  SKIPLOCK_DEAD_RETENTION_HOURS: withDefault(int(0, 87_600), MAINTENANCE_DEFAULTS.deadRetentionMs / 3_600_000),
  SKIPLOCK_EVENT_RETENTION_HOURS: withDefault(int(0, 87_600), MAINTENANCE_DEFAULTS.eventRetentionMs / 3_600_000),
  SKIPLOCK_LOG_LEVEL: withDefault(z.enum(['debug', 'info', 'warn', 'error']), FUNCTION_DEFAULTS.logLevel),
  SKIPLOCK_METRICS: withDefault(z.enum(['none', 'emf']), FUNCTION_DEFAULTS.metrics),
  SKIPLOCK_SERVICE_NAME: z.optional(z.string().check(z.minLength(1), z.maxLength(200))),
  SKIPLOCK_CONSOLE_READ_ONLY: flag(false),
  SKIPLOCK_CONSOLE_SESSION_MINUTES: withDefault(int(5, 10_080), FUNCTION_DEFAULTS.consoleSessionMinutes),
  AWS_LAMBDA_FUNCTION_NAME: z.optional(z.string()),
} as const;

type Variable = keyof typeof VARIABLES;
type Values = { [K in Variable]: z.output<(typeof VARIABLES)[K]> };

/**
 * What each deployed function reads. A bad value in a variable a function does not read never
 * stops it: a wrong SKIPLOCK_CONCURRENCY disables the worker, not the enqueue endpoint.
 */
export const PURPOSES = {
  /** Every function: where the database is and how to talk to it, logs, metrics. */
  database: [
    'DATABASE_URL',
    'DATABASE_SECRET_ID',
    'SKIPLOCK_DRIVER',
    'SKIPLOCK_NEON_WS_PROXY',
    'SKIPLOCK_NEON_FETCH_ENDPOINT',
    'SKIPLOCK_SCHEMA',
    'SKIPLOCK_SECRET_TTL_MS',
    'SKIPLOCK_POOL_MAX',
    'SKIPLOCK_STATEMENT_TIMEOUT_MS',
    'SKIPLOCK_QUERY_TIMEOUT_MS',
    'SKIPLOCK_PREPARED_STATEMENTS',
    'SKIPLOCK_LOG_LEVEL',
    'SKIPLOCK_METRICS',
    'SKIPLOCK_SERVICE_NAME',
  ],
  worker: [
    'SKIPLOCK_QUEUES',
    'SKIPLOCK_KINDS',
    'SKIPLOCK_CONCURRENCY',
    'SKIPLOCK_BATCH_SIZE',
    'SKIPLOCK_MAX_INVOCATIONS',
    'SKIPLOCK_WORKER_NAME',
    'SKIPLOCK_FAN_OUT_TARGET_MS',
    'SKIPLOCK_LINGER_MS',
    'SKIPLOCK_IDLE',
    'SKIPLOCK_IDLE_RECHECK_MINUTES',
    'SKIPLOCK_SAFETY_MARGIN_MS',
    'SKIPLOCK_LEASE_GRACE_MS',
    'SKIPLOCK_COMPLETED_JOBS',
    'SKIPLOCK_MAX_DURATION_MS',
    'SKIPLOCK_BASE_URL',
    'SKIPLOCK_WAKE_ROLE_ARN',
    'SKIPLOCK_WAKE_GROUP',
    'SKIPLOCK_MAINTENANCE_FUNCTION',
  ],
  enqueue: [
    'SKIPLOCK_MAX_BODY_BYTES',
    'SKIPLOCK_MAX_PAYLOAD_BYTES',
    'SKIPLOCK_NUDGE_FUNCTIONS',
    'SKIPLOCK_NUDGE_ROUTES',
    'SKIPLOCK_BASE_URL',
    'SKIPLOCK_IDLE',
    'SKIPLOCK_WAKE_ROLE_ARN',
    'SKIPLOCK_WAKE_GROUP',
  ],
  replay: ['SKIPLOCK_MAX_BODY_BYTES', 'SKIPLOCK_IDLE'],
  console: ['SKIPLOCK_CONSOLE_READ_ONLY', 'SKIPLOCK_CONSOLE_SESSION_MINUTES', 'SKIPLOCK_IDLE'],
  maintenance: [
    'SKIPLOCK_IDLE',
    'SKIPLOCK_IDLE_RECHECK_MINUTES',
    'SKIPLOCK_COMPLETED_RETENTION_HOURS',
    'SKIPLOCK_DEAD_RETENTION_HOURS',
    'SKIPLOCK_EVENT_RETENTION_HOURS',
    'SKIPLOCK_SAFETY_MARGIN_MS',
    'SKIPLOCK_MAX_DURATION_MS',
    'SKIPLOCK_WAKE_ROLE_ARN',
    'SKIPLOCK_WAKE_GROUP',
  ],
} as const satisfies Record<string, readonly Variable[]>;

export type Purpose = keyof typeof PURPOSES;

/** Variables only one driver reads: a bad value there disables nothing that runs on another. */
const DRIVER_ONLY: Partial<Record<Variable, Driver>> = {
  SKIPLOCK_NEON_WS_PROXY: 'neon-ws',
  SKIPLOCK_NEON_FETCH_ENDPOINT: 'neon-http',
};
const readBy = (name: Variable, driver: Driver) => (DRIVER_ONLY[name] ?? driver) === driver;

/** The environment, read once: every variable's value (its default where it is bad) and its problem. */
export class EnvironmentSettings {
  readonly #values: Values;
  readonly #problems = new Map<Variable, string>();

  constructor(env: Record<string, string | undefined>) {
    const values: Record<string, unknown> = {};
    for (const [name, schema] of Object.entries(VARIABLES) as [Variable, z.ZodMiniType][]) {
      const parsed = check(schema, env[name]);
      if (parsed.success) {
        values[name] = parsed.data;
      } else {
        // Never echo the value: some are secrets.
        this.#problems.set(name, `${name} ${parsed.error.issues[0]?.message ?? 'is invalid'}`);
        values[name] = check(schema, undefined).data;
      }
    }
    this.#values = values as Values;
    if (!this.#values.DATABASE_URL && !this.#values.DATABASE_SECRET_ID && !this.#problems.has('DATABASE_URL')) {
      this.#problems.set('DATABASE_URL', 'DATABASE_URL must be set');
    }
  }

  /**
   * The problems among the variables `purposes` read (all of them when none is given), leaving out
   * those of a driver other than SKIPLOCK_DRIVER's.
   */
  problems(...purposes: Purpose[]): string[] {
    const names = purposes.length === 0 ? undefined : new Set<Variable>(purposes.flatMap((p) => PURPOSES[p]));
    return [...this.#problems]
      .filter(([name]) => (!names || names.has(name)) && readBy(name, this.#values.SKIPLOCK_DRIVER))
      .map(([, message]) => message);
  }

  /**
   * How to reach the database with `driver` (default: SKIPLOCK_DRIVER's), for those that choose the
   * driver themselves (the CLI's --driver): its Neon settings, or a ConfigError naming the variable
   * that is wrong — SKIPLOCK_DRIVER when no driver is given, else only that driver's own.
   */
  connection(driver?: Driver): { driver: Driver; neon: NeonOptions | undefined } {
    const chosen = driver ?? this.#values.SKIPLOCK_DRIVER;
    const names: Variable[] = driver ? [] : ['SKIPLOCK_DRIVER'];
    names.push(...(Object.keys(DRIVER_ONLY) as Variable[]).filter((name) => readBy(name, chosen)));
    const problems = names.flatMap((name) => this.#problems.get(name) ?? []);
    if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
    return { driver: chosen, neon: this.#neon(chosen) };
  }

  #neon(driver: Driver): NeonOptions | undefined {
    if (driver === 'neon-ws') return this.#values.SKIPLOCK_NEON_WS_PROXY;
    if (driver === 'neon-http' && this.#values.SKIPLOCK_NEON_FETCH_ENDPOINT)
      return { fetchEndpoint: this.#values.SKIPLOCK_NEON_FETCH_ENDPOINT };
    return undefined;
  }

  /**
   * The configuration, once every variable `purposes` read is valid; otherwise a ConfigError that
   * lists each of their problems (and only theirs).
   */
  require(...purposes: Purpose[]): SkiplockConfig {
    const problems = this.problems(...purposes);
    if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
    const e = this.#values;
    return {
      databaseUrl: e.DATABASE_URL,
      databaseSecretId: e.DATABASE_URL ? undefined : e.DATABASE_SECRET_ID,
      driver: e.SKIPLOCK_DRIVER,
      neon: this.#neon(e.SKIPLOCK_DRIVER),
      schema: e.SKIPLOCK_SCHEMA,
      queues: e.SKIPLOCK_QUEUES,
      kinds: e.SKIPLOCK_KINDS,
      concurrency: e.SKIPLOCK_CONCURRENCY,
      maxInvocations: e.SKIPLOCK_MAX_INVOCATIONS,
      workerName: e.SKIPLOCK_WORKER_NAME ?? e.AWS_LAMBDA_FUNCTION_NAME ?? WORKER_DEFAULTS.name,
      fanOutTargetMs: e.SKIPLOCK_FAN_OUT_TARGET_MS,
      lingerMs: e.SKIPLOCK_LINGER_MS,
      idle: e.SKIPLOCK_IDLE,
      idleRecheckMs: e.SKIPLOCK_IDLE_RECHECK_MINUTES * 60_000,
      batchSize: e.SKIPLOCK_BATCH_SIZE,
      safetyMarginMs: e.SKIPLOCK_SAFETY_MARGIN_MS,
      leaseGraceMs: e.SKIPLOCK_LEASE_GRACE_MS,
      completedJobs: e.SKIPLOCK_COMPLETED_JOBS,
      maxDurationMs: e.SKIPLOCK_MAX_DURATION_MS,
      secretTtlMs: e.SKIPLOCK_SECRET_TTL_MS,
      poolMax: e.SKIPLOCK_POOL_MAX,
      statementTimeoutMs: e.SKIPLOCK_STATEMENT_TIMEOUT_MS,
      queryTimeoutMs: e.SKIPLOCK_QUERY_TIMEOUT_MS,
      preparedStatements: e.SKIPLOCK_PREPARED_STATEMENTS,
      maxBodyBytes: e.SKIPLOCK_MAX_BODY_BYTES,
      nudgeFunctions: e.SKIPLOCK_NUDGE_FUNCTIONS,
      nudgeRoutes: e.SKIPLOCK_NUDGE_ROUTES,
      baseUrl: e.SKIPLOCK_BASE_URL,
      wakeRoleArn: e.SKIPLOCK_WAKE_ROLE_ARN,
      wakeGroup: e.SKIPLOCK_WAKE_GROUP,
      maintenanceFunction: e.SKIPLOCK_MAINTENANCE_FUNCTION,
      maxPayloadBytes: e.SKIPLOCK_MAX_PAYLOAD_BYTES,
      completedRetentionHours: e.SKIPLOCK_COMPLETED_RETENTION_HOURS,
      deadRetentionHours: e.SKIPLOCK_DEAD_RETENTION_HOURS,
      eventRetentionHours: e.SKIPLOCK_EVENT_RETENTION_HOURS,
      logLevel: e.SKIPLOCK_LOG_LEVEL,
      metrics: e.SKIPLOCK_METRICS,
      serviceName: e.SKIPLOCK_SERVICE_NAME ?? e.AWS_LAMBDA_FUNCTION_NAME ?? 'skiplock',
      consoleReadOnly: e.SKIPLOCK_CONSOLE_READ_ONLY,
      consoleSessionMinutes: e.SKIPLOCK_CONSOLE_SESSION_MINUTES,
    };
  }
}

export const CONFIG_VARIABLES = Object.keys(VARIABLES);

/**
 * Reads and validates the whole configuration: every problem is listed in one message, by
 * variable name; no value is ever repeated back. The deployed functions check only the
 * variables each one reads (see PURPOSES).
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): SkiplockConfig {
  return new EnvironmentSettings(env).require();
}
