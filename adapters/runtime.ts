import { DatabaseError, SkiplockError } from '../base/errors.js';
import { jsonLogger, type Logger } from '../core/logger.js';
import type { SkiplockConnection } from '../db/connect.js';
import { connectLazily } from '../db/connect-lazy.js';
import { EnvironmentSettings, type SkiplockConfig } from './config.js';
import { type DatabaseUrlSource, type SecretFetcher, secretDatabaseUrl, staticDatabaseUrl } from './secrets.js';

/** The pools of the request being served, on a platform whose sockets belong to one request. */
export interface RequestPools {
  /** `owner`'s pool on `url` for this request, opened by `open` on first use. */
  pool(owner: object, url: string, open: () => Promise<SkiplockConnection>): Promise<SkiplockConnection>;
}
let requestPools: (() => RequestPools | undefined) | undefined;

/**
 * Set by an adapter whose platform ties a socket to the request that opened it (Cloudflare Workers:
 * adapters/request-connections.ts): inside a request that has pools of its own, each runtime opens
 * its pool there; elsewhere one pool per runtime is kept across requests.
 */
export function scopeConnectionsToRequests(current: () => RequestPools | undefined): void {
  requestPools = current;
}

/** SQLSTATEs of a refused login: the password may have rotated. */
const AUTH_FAILURES = new Set(['28P01', '28000']);

export function isAuthFailure(codeOrError: unknown): boolean {
  if (typeof codeOrError === 'string') return AUTH_FAILURES.has(codeOrError);
  return codeOrError instanceof DatabaseError && AUTH_FAILURES.has(codeOrError.sqlState ?? '');
}

/**
 * What a deployed function keeps between warm invocations: its configuration, the
 * database URL source (with its secret cache) and one connection pool — or, where sockets belong
 * to one request (Cloudflare Workers), a pool per request (scopeConnectionsToRequests).
 */
export class FunctionRuntime {
  /** The environment as read; each function asks for the settings it needs (settings.require). */
  readonly settings: EnvironmentSettings;
  /** The settings every function shares (database, logs, metrics); valid by construction. */
  readonly config: SkiplockConfig;
  readonly logger: Logger;
  readonly #source: DatabaseUrlSource;
  #connection: { url: string; db: Promise<SkiplockConnection> } | undefined;

  constructor(settings: EnvironmentSettings, options: { fetchSecret?: SecretFetcher; logger?: Logger } = {}) {
    this.settings = settings;
    const config = settings.require('database');
    this.config = config;
    this.logger = options.logger ?? jsonLogger({ level: config.logLevel });
    this.#source = config.databaseUrl
      ? staticDatabaseUrl(config.databaseUrl)
      : secretDatabaseUrl(config.databaseSecretId as string, {
          ttlMs: config.secretTtlMs,
          fetchSecret: options.fetchSecret,
        });
  }

  /** The pool for the current URL; a new one when a refreshed secret changed the URL. */
  async db(): Promise<SkiplockConnection> {
    return this.#connect(await this.#source.get());
  }

  /**
   * Runs `fn` with the database. When the login is refused and the URL comes from a
   * secret, fetches the secret once more, reconnects, and tries `fn` once again.
   * `failedLogin` lets callers whose errors are returned rather than thrown say so.
   */
  async withDb<T>(
    fn: (db: SkiplockConnection) => Promise<T>,
    failedLogin: (result: T) => boolean = () => false,
  ): Promise<T> {
    const attempt = async () => fn(await this.db());
    let result: T;
    try {
      result = await attempt();
    } catch (err) {
      if (!this.#source.rotatable || !isAuthFailure(err)) throw err;
      await this.#rotate();
      return attempt();
    }
    if (this.#source.rotatable && failedLogin(result)) {
      await this.#rotate();
      return attempt();
    }
    return result;
  }

  async close(): Promise<void> {
    const current = this.#connection;
    this.#connection = undefined;
    await (await current?.db.catch(() => undefined))?.close();
  }

  async #rotate(): Promise<void> {
    this.logger.warn('database_login_refused', { action: 'refreshing the database secret once' });
    await this.#source.refresh();
  }

  #connect(url: string): Promise<SkiplockConnection> {
    // A platform whose sockets belong to one request (Cloudflare Workers): a pool for that request.
    const request = requestPools?.();
    if (request) return request.pool(this, url, () => this.#open(url));
    if (this.#connection?.url === url) return this.#connection.db;
    const previous = this.#connection;
    const db = this.#open(url);
    this.#connection = { url, db };
    db.catch(() => {
      if (this.#connection?.db === db) this.#connection = undefined;
    });
    previous?.db.then((old) => old.close()).catch(() => {});
    return db;
  }

  #open(url: string): Promise<SkiplockConnection> {
    return connectLazily({
      connectionString: url,
      driver: this.config.driver,
      max: this.config.poolMax,
      statementTimeoutMs: this.config.statementTimeoutMs,
      queryTimeoutMs: this.config.queryTimeoutMs,
      preparedStatements: this.config.preparedStatements,
      neon: this.config.neon,
    });
  }
}

/** The runtimes of this container by environment object (one in a deployed function; tests use several). */
const shared = new Map<Record<string, string | undefined>, FunctionRuntime>();
/** More environments than this (a fresh object per call): the oldest runtime is closed. */
const MAX_SHARED = 8;

/**
 * The runtime of this container, built on first use. A problem with the settings every function
 * needs (the database's) is thrown every time, with each problem in its message; settings only
 * some functions read are checked by those functions (runtime.settings.require).
 */
export function sharedRuntime(env: Record<string, string | undefined> = process.env): FunctionRuntime {
  const known = shared.get(env);
  if (known) return known;
  const runtime = new FunctionRuntime(new EnvironmentSettings(env));
  shared.set(env, runtime);
  if (shared.size > MAX_SHARED) {
    const [oldestEnv, oldest] = shared.entries().next().value as [Record<string, string | undefined>, FunctionRuntime];
    shared.delete(oldestEnv);
    void oldest.close().catch(() => {});
  }
  return runtime;
}

/** For tests and local development: forget the container state, closing every pool. */
export async function resetSharedRuntime(): Promise<void> {
  const runtimes = [...shared.values()];
  shared.clear();
  await Promise.all(runtimes.map((r) => r.close()));
}

/** A message safe to return or log for any error: ours verbatim, anything else generic. */
export function publicMessage(err: unknown): string {
  return err instanceof SkiplockError ? err.message : 'internal error';
}
