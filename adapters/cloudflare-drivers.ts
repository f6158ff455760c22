import { ConfigError } from '../base/errors.js';
import type { Driver } from '../db/drivers/names.js';
import { RequestConnections } from './request-connections.js';

/**
 * How each driver holds on Workers, where a socket belongs to the request that opened it (workerd
 * cancels, as hung, a request that uses another's): the drivers with sockets open their pool for
 * each request and close it once the request's work (its `waitUntil` included) is done.
 */
export const CLOUDFLARE_DRIVERS = {
  'neon-http': 'one fetch per statement or batch (Neon’s HTTP API): nothing outlives the request',
  'neon-ws': 'Neon’s Pool over WebSockets, opened for each request and closed when its work is done',
  pg:
    'node-postgres over cloudflare:sockets, to DATABASE_URL or through a Hyperdrive binding, opened for ' +
    'each request and closed when its work is done',
} as const satisfies Record<Driver, string>;

/**
 * Workers' limit on the connections one request holds open at once: its sockets, WebSockets and
 * fetches together (developers.cloudflare.com/workers/platform/limits, "Simultaneous open connections").
 */
export const WORKERS_OPEN_CONNECTIONS = 6;

/** What skiplock reads of a Hyperdrive binding. */
interface HyperdriveBinding {
  readonly connectionString: string;
}
const isHyperdrive = (value: unknown): value is HyperdriveBinding =>
  typeof value === 'object' && value !== null && typeof (value as HyperdriveBinding).connectionString === 'string';

/** The driver a bundle was built for (`define` of process.env.SKIPLOCK_BUNDLE_DRIVER), if one. */
const bundledDriver = (): string | undefined => process.env.SKIPLOCK_BUNDLE_DRIVER;

/**
 * The Worker's database settings, added to its text variables: a Hyperdrive binding (`hyperdrive`,
 * by default the one named HYPERDRIVE when there is one) gives DATABASE_URL its connection string
 * and pg as the driver; SKIPLOCK_DRIVER otherwise defaults to the bundle's driver, else neon-http.
 * Returns the binding's name when skiplock connects through one.
 */
export function cloudflareDatabase(
  text: Record<string, string | undefined>,
  env: Record<string, unknown>,
  hyperdrive: string | false | undefined,
): string | undefined {
  const name = hyperdrive === false ? undefined : (hyperdrive ?? 'HYPERDRIVE');
  const binding = name === undefined ? undefined : env[name];
  if (typeof hyperdrive === 'string' && !isHyperdrive(binding)) {
    throw new ConfigError(
      `the Worker has no Hyperdrive binding named ${hyperdrive} (wrangler.jsonc: "hyperdrive": [{ "binding": ` +
        `"${hyperdrive}", "id": "…" }])`,
    );
  }
  if (isHyperdrive(binding)) {
    text.DATABASE_URL = binding.connectionString;
    text.SKIPLOCK_DRIVER ??= 'pg';
  }
  text.SKIPLOCK_DRIVER ??= bundledDriver() ?? 'neon-http';
  return isHyperdrive(binding) ? name : undefined;
}

/** Whether `driver` opens sockets, which must be opened and closed within each request. */
export function opensSockets(driver: string | undefined): boolean {
  return driver === 'pg' || driver === 'neon-ws';
}

/**
 * A driver that cannot hold as configured is a ConfigError before any statement is sent: one the
 * bundle left out, one that cannot speak through a Hyperdrive binding, a pool larger than the
 * connections a request may hold open. `hyperdrive`: the binding skiplock connects through, if one.
 */
export function assertCloudflareDriver(env: Record<string, string | undefined>, hyperdrive?: string): void {
  const driver = env.SKIPLOCK_DRIVER ?? bundledDriver() ?? 'neon-http';
  const refuse = (why: string) => {
    throw new ConfigError(`SKIPLOCK_DRIVER=${driver} cannot run on this Cloudflare Worker: ${why}`);
  };
  const bundled = bundledDriver();
  if (bundled !== undefined && bundled !== driver) {
    refuse(
      `the Worker was bundled for ${bundled} alone (process.env.SKIPLOCK_BUNDLE_DRIVER in wrangler.jsonc's ` +
        `define): set the define to "${driver}", or remove it to bundle every driver`,
    );
  }
  if (hyperdrive !== undefined && driver !== 'pg') {
    refuse(
      `the Hyperdrive binding ${hyperdrive} carries Postgres's own protocol over a TCP socket, which only pg ` +
        'speaks: set SKIPLOCK_DRIVER=pg (or leave it unset), or pass hyperdrive: false to connect with DATABASE_URL',
    );
  }
  const poolMax = Number(env.SKIPLOCK_POOL_MAX);
  if (opensSockets(driver) && Number.isInteger(poolMax) && poolMax > WORKERS_OPEN_CONNECTIONS) {
    refuse(
      `SKIPLOCK_POOL_MAX=${poolMax}, but a request holds at most ${WORKERS_OPEN_CONNECTIONS} connections open ` +
        '(sockets and fetches together) and a larger pool would wait on itself: set SKIPLOCK_POOL_MAX to ' +
        `${WORKERS_OPEN_CONNECTIONS} or less (the default, 5, leaves one for a handler's fetch)`,
    );
  }
}

/** A Worker's `ctx` (CloudflareContext), as far as this needs it. */
type Context = { waitUntil(promise: Promise<unknown>): void };

/**
 * One request's (or Cron Trigger's) `ctx`, counting the work handed to its `waitUntil`: on a driver
 * with sockets, the connections the request opens are closed once its handler and all that work
 * have settled (a nudge's invocation runs after its 202, so the response is not the end).
 */
export class CloudflareRequest implements Context {
  readonly #ctx: Context;
  readonly #pending = new Set<Promise<unknown>>();

  constructor(ctx: Context) {
    this.#ctx = ctx;
  }

  waitUntil(promise: Promise<unknown>): void {
    this.#pending.add(promise);
    this.#ctx.waitUntil(promise);
  }

  /** Runs `work`; with `sockets`, in a scope of its own connections, closed after everything it started. */
  run<T>(sockets: boolean, work: () => Promise<T>): Promise<T> {
    if (!sockets) return work();
    const connections = new RequestConnections();
    const result = connections.run(work);
    this.#ctx.waitUntil(this.#closeAfter(result, connections));
    return result;
  }

  async #closeAfter(result: Promise<unknown>, connections: RequestConnections): Promise<void> {
    await result.catch(() => {});
    // Work may hand more to waitUntil while it runs (a nudge's delayed start): until none is left.
    for (let open = [...this.#pending]; open.length > 0; open = [...this.#pending]) {
      await Promise.allSettled(open);
      for (const settled of open) this.#pending.delete(settled);
    }
    await connections.close();
  }
}
