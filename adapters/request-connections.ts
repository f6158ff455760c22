import { AsyncLocalStorage } from 'node:async_hooks';
import type { SkiplockConnection } from '../db/connection-options.js';
import { type RequestPools, scopeConnectionsToRequests } from './runtime.js';

const current = new AsyncLocalStorage<RequestConnections>();

/**
 * The database connections opened while serving one request, on a platform where a socket belongs
 * to the request that opened it: on Cloudflare Workers a TCP socket (node-postgres over
 * `cloudflare:sockets`, Hyperdrive) or a WebSocket (Neon's Pool) cannot be used by another request —
 * workerd cancels the request that tries, as hung. Inside `run`, a FunctionRuntime opens its pool for
 * this request alone (FunctionRuntime.db); `close()` ends them once the request's work is done.
 * Loading this module is what scopes the runtimes' pools (scopeConnectionsToRequests): only the
 * Cloudflare adapter does, and the other platforms' bundles leave it out.
 */
export class RequestConnections implements RequestPools {
  /** Per runtime, its pool for each database URL this request used. */
  readonly #pools = new Map<object, Map<string, Promise<SkiplockConnection>>>();
  #closed = false;

  /** The connections of the request being served, if its platform scopes them to it. */
  static current(): RequestConnections | undefined {
    return current.getStore();
  }

  /** Runs `work` (and everything it starts) with its connections kept here. */
  run<T>(work: () => T): T {
    return current.run(this, work);
  }

  /** `owner`'s pool on `url` for this request: opened by `open` on first use. */
  pool(owner: object, url: string, open: () => Promise<SkiplockConnection>): Promise<SkiplockConnection> {
    // Something the request left running past its end (not handed to waitUntil) gets no new socket.
    if (this.#closed) return Promise.reject(new Error('the request has ended: its database connections are closed'));
    let pools = this.#pools.get(owner);
    if (!pools) {
      pools = new Map();
      this.#pools.set(owner, pools);
    }
    let db = pools.get(url);
    if (!db) {
      db = open();
      pools.set(url, db);
    }
    return db;
  }

  /** Ends every pool this request opened; a pool that failed to open or to close is passed over. */
  async close(): Promise<void> {
    this.#closed = true;
    const opened = [...this.#pools.values()].flatMap((pools) => [...pools.values()]);
    this.#pools.clear();
    await Promise.all(opened.map(async (db) => (await db.catch(() => undefined))?.close().catch(() => {})));
  }
}

scopeConnectionsToRequests(RequestConnections.current);
