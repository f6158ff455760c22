import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { ConfigError } from '../base/errors.js';
import { DRIVERS, type Driver } from './drivers/names.js';
import type { Executor } from './executor.js';

export { DRIVERS, type Driver };

/** Any Drizzle Postgres database or transaction: node-postgres, neon-serverless or neon-http. */
// biome-ignore lint/suspicious/noExplicitAny: the helper accepts every Drizzle Postgres flavour.
export type AnyPgDatabase = PgDatabase<PgQueryResultHKT, any, any>;

export interface ConnectOptions {
  connectionString: string;
  /** @defaultValue 'pg' */
  driver?: Driver;
  /** Pool size (pg, neon-ws). A short-lived function needs few connections. @defaultValue 5 */
  max?: number;
  /** Server-side `statement_timeout` for every statement (pg, neon-ws); 0 sends none. @defaultValue 10000 */
  statementTimeoutMs?: number;
  /**
   * Client-side limit for one statement (pg, neon-ws) or one request (neon-http): a half-open
   * socket (the network dropped the peer without closing) cannot hang a caller longer than this; the
   * connection is then discarded and the caller gets an OutcomeUnknownError. @defaultValue 15000
   */
  queryTimeoutMs?: number;
  /** Give up opening a connection after this long (pg, neon-ws). @defaultValue 5000 */
  connectionTimeoutMs?: number;
  /** Close idle pooled connections after this long (pg, neon-ws). @defaultValue 10000 */
  idleTimeoutMs?: number;
  /**
   * Whether the server may JIT-compile skiplock's statements. Off unless true: on pg and neon-ws
   * each new connection first runs `SET jit = off`; neon-http has no session, so its keyed, limited
   * and rated claims go as one request that starts with `SET LOCAL jit = off`. A claim over a large backlog is
   * estimated above the server's jit_above_cost, and compiling it took 409 ms for a statement that
   * runs in ~50 ms (a claim of 500 over 50,000 keyed jobs; docs/performance.md), more as the
   * backlog grows. @defaultValue false
   */
  jit?: boolean;
  /**
   * pg: the claim and the settle — the statements a worker sends for every batch — go as named
   * prepared statements, each in a transaction of its own written with it (one round trip) that
   * asks for one plan per connection, made with sequential scans off (`SET LOCAL`: the settings end
   * with the transaction). Parse, analysis and planning were ~2 ms of each claim's database time.
   * Turn off behind a pooler in transaction mode that cannot carry named statements (PgBouncer
   * before 1.21); a pooler that refuses one is detected and the pool falls back by itself.
   * @defaultValue true
   */
  preparedStatements?: boolean;
  /**
   * Settings for Neon's drivers (neon-ws, neon-http). Against Neon itself none are needed. They
   * are applied to the `neonConfig` of the copy of `@neondatabase/serverless` skiplock uses, which
   * Neon's driver keeps process-wide. To reach a plain Postgres through a WebSocket proxy and a
   * SQL-over-HTTP endpoint (local development, tests), use `startLocalNeon()` from 'skiplock/testing'.
   * @defaultValue none (Neon's defaults)
   */
  neon?: NeonOptions;
}

/** The subset of Neon's `neonConfig` that points its drivers somewhere other than Neon. */
export interface NeonOptions {
  /** neon-ws: where the WebSocket proxy is, e.g. `(host, port) => \`127.0.0.1:4444/v1?address=${host}:${port}\`` */
  wsProxy?: string | ((host: string, port: number | string) => string);
  /** neon-ws: `wss://` when true, `ws://` when false. @defaultValue true */
  useSecureWebSocket?: boolean;
  /** neon-ws: send TLS and the startup message before the proxy answers. Off for a plain proxy. */
  pipelineTLS?: boolean;
  /** neon-ws: send the password before the server asks for it. Off for a plain proxy. */
  pipelineConnect?: 'password' | false;
  /** neon-ws: batch small writes (adds ~1 ms per query). @defaultValue true */
  coalesceWrites?: boolean;
  /** neon-ws: a WebSocket constructor; Node 20 has none (the `ws` package's is used then). */
  webSocketConstructor?: unknown;
  /** neon-http: the SQL-over-HTTP endpoint, a URL or `(host, port) => url`. */
  fetchEndpoint?: string | ((host: string, port: number | string) => string);
}

/**
 * Makes a Drizzle database over one connection, for the transactions a deployed worker hands its
 * handlers (transactional kinds and steps): `drizzle` from 'drizzle-orm/node-postgres', or your own
 * `({ client }) => drizzle({ client, schema })` for Drizzle's relational queries on `ctx.tx`.
 */
// biome-ignore lint/suspicious/noExplicitAny: Drizzle's drizzle() is overloaded; any of its forms that takes { client } fits.
export type DrizzleFactory = (config: { client: any }) => {
  transaction<T>(work: (tx: AnyPgDatabase) => Promise<T>): Promise<T>;
};

/**
 * What skiplock's functions take: a connection pool (or neon-http's client) through one driver, and
 * what skiplock needs to know about how it talks to Postgres. connect() returns one with a Drizzle
 * database (SkiplockDb); the deployed functions' pg pool has none (see `drizzleTransaction`).
 */
export interface SkiplockConnection {
  readonly driver: Driver;
  /** What skiplock's own statements run on (db/executor.ts). */
  readonly executor: Executor;
  /** Whether a Drizzle database over it can run `transaction()` (false on neon-http). */
  readonly interactiveTransactions: boolean;
  /**
   * Set when it has no Drizzle database (the deployed functions' pg pool, which keeps Drizzle's
   * query builders out of their bundles): a transaction handed to a handler must then be made by
   * `drizzle` over one of the pool's connections. Unset: `db.transaction()` gives one.
   */
  readonly drizzleTransaction?: <T>(drizzle: DrizzleFactory, work: (tx: AnyPgDatabase) => Promise<T>) => Promise<T>;
  close(): Promise<void>;
}

/** What connect() returns: a connection and the Drizzle database over the same pool, for your own queries. */
export interface SkiplockDb<Database extends AnyPgDatabase = AnyPgDatabase> extends SkiplockConnection {
  readonly db: Database;
}

/** Whether `conn` carries a Drizzle database (connect()'s do; the deployed functions' pg pool does not). */
export function hasDrizzleDatabase(conn: SkiplockConnection): conn is SkiplockDb {
  return 'db' in conn;
}

/** Pool settings in the shape node-postgres and Neon's Pool take. */
export interface PoolSettings {
  connectionString: string;
  max: number;
  statement_timeout: number | undefined;
  query_timeout: number | undefined;
  keepAlive: boolean;
  connectionTimeoutMillis: number;
  idleTimeoutMillis: number;
  allowExitOnIdle: boolean;
  neon: NeonOptions | undefined;
  /** false: each new connection runs `SET jit = off` first. */
  jit: boolean;
  /** pg: the hot statements as named prepared statements (ConnectOptions.preparedStatements). */
  preparedStatements: boolean;
}

export const CONNECT_DEFAULTS = {
  driver: 'pg',
  max: 5,
  statementTimeoutMs: 10_000,
  queryTimeoutMs: 15_000,
  connectionTimeoutMs: 5_000,
  idleTimeoutMs: 10_000,
  jit: false,
  preparedStatements: true,
} as const satisfies Omit<Required<ConnectOptions>, 'connectionString' | 'neon'>;

let timersUnref: boolean | undefined;
/**
 * Whether timers are Node's, which `unref()` (Node, Bun, Deno's Node layer): the pools' allowExitOnIdle
 * lets the process exit past idle connections by unref'ing their timers. Where a timer is a number
 * (workerd: a Worker has no process to exit) pg-pool's release calls unref() on it, throws, and the
 * query that released its client never answers.
 */
function unrefTimers(): boolean {
  if (timersUnref === undefined) {
    const probe: unknown = setTimeout(() => {}, 0);
    clearTimeout(probe as ReturnType<typeof setTimeout>);
    timersUnref = typeof (probe as { unref?: unknown } | null)?.unref === 'function';
  }
  return timersUnref;
}

/** Validates the options (never echoing the connection string) and turns them into pool settings. */
export function poolSettings(options: ConnectOptions): { driver: Driver; settings: PoolSettings } {
  const opts = { ...CONNECT_DEFAULTS, ...options };
  if (!opts.connectionString || typeof opts.connectionString !== 'string') {
    throw new ConfigError('a connection string is required (set DATABASE_URL)');
  }
  let url: URL | undefined;
  try {
    url = new URL(opts.connectionString);
  } catch {
    url = undefined;
  }
  // Never echo the string itself: it usually carries a password.
  if (!url || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || !url.hostname) {
    throw new ConfigError('the connection string is not a valid postgres:// or postgresql:// URL');
  }
  if (!(DRIVERS as readonly string[]).includes(opts.driver)) {
    throw new ConfigError(`unknown driver ${JSON.stringify(opts.driver)}; use one of ${DRIVERS.join(', ')}`);
  }
  return {
    driver: opts.driver,
    settings: {
      connectionString: opts.connectionString,
      max: opts.max,
      statement_timeout: opts.statementTimeoutMs > 0 ? opts.statementTimeoutMs : undefined,
      query_timeout: opts.queryTimeoutMs > 0 ? opts.queryTimeoutMs : undefined,
      keepAlive: true,
      connectionTimeoutMillis: opts.connectionTimeoutMs,
      idleTimeoutMillis: opts.idleTimeoutMs,
      allowExitOnIdle: unrefTimers(),
      neon: opts.neon,
      jit: opts.jit === true,
      preparedStatements: opts.preparedStatements !== false,
    },
  };
}
