import { type NeonQueryFunction, neon } from '@neondatabase/serverless';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/neon-http';
import type { PoolSettings, SkiplockDb } from '../connection-options.js';
import { drizzleExecutor } from '../drizzle-executor.js';
import type { Executor } from '../executor.js';
import { observed } from '../statement-listeners.js';
import { applyNeonOptions } from './neon-config.js';

type NeonClient = NeonQueryFunction<false, false>;
type QueryOptions = Parameters<NeonClient['query']>[2];

/**
 * Neon's HTTP driver: one request per statement or batch; no interactive transactions, no session.
 * Each request is cut off after `query_timeout` (a request whose answer never comes must not hold
 * the caller), and unless `jit` is on, the claims whose plans grow with the backlog (keyed, limited,
 * rated) go as a batch that first turns JIT off for their own transaction: there is no session to set
 * it on, and a keyed claim over a large backlog was compiled for 1.7–3.9 s per claim where it runs in
 * milliseconds. The plain claim and the settle stay single requests (HotStatementHint: cheap).
 */
export function neonHttpDatabase(settings: PoolSettings): SkiplockDb {
  applyNeonOptions(settings.neon);
  const untimed = neon(settings.connectionString);
  const client = settings.query_timeout ? timedClient(untimed, settings.query_timeout) : untimed;
  const db = drizzle({ client });
  const executor = drizzleExecutor(db);
  const hot: Executor['hot'] = async (statement, hint) => {
    if (hint.cheap) return executor.query(statement);
    const [, rows] = await executor.batch([sql`set local jit = off`, statement]);
    return rows ?? [];
  };
  return {
    driver: 'neon-http',
    db,
    executor: observed(settings.jit ? executor : { ...executor, hot }, 'neon-http'),
    interactiveTransactions: false,
    close: async () => {},
  };
}

/** The client with every request (a statement, a batch) aborted after `ms`. */
function timedClient(client: NeonClient, ms: number): NeonClient {
  const timed = (options: QueryOptions | undefined) => ({
    ...options,
    fetchOptions: { ...options?.fetchOptions, signal: AbortSignal.timeout(ms) },
  });
  const query = ((text: string, params?: unknown[], options?: QueryOptions) =>
    client.query(text, params, timed(options) as QueryOptions)) as NeonClient['query'];
  const transaction = ((queries: unknown, options?: QueryOptions) =>
    (client.transaction as (q: unknown, o: unknown) => unknown)(queries, timed(options))) as NeonClient['transaction'];
  return Object.assign(Object.create(client) as NeonClient, { query, transaction });
}
