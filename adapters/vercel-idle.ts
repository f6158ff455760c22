import { ConfigError } from '../base/errors.js';
import { importOptionalPeer } from './optional-peer.js';
import type { IdleHintStore } from './web/idle.js';

type Env = Record<string, string | undefined>;

/**
 * Vercel's hint store for idle ticks: its Runtime Cache. The hints themselves (IdleHints, the
 * store's interface, a store in memory) are the web core's: adapters/web/idle.ts.
 */

/** The part of `@vercel/functions`' RuntimeCache a hint store uses (`getCache()`'s result). */
export interface RuntimeCacheLike {
  get(key: string): Promise<unknown>;
  set(key: string, value: unknown, options?: { ttl?: number; name?: string }): Promise<void>;
}

/** `getCache` of `@vercel/functions`: called once per store, with skiplock's namespace. */
export type GetRuntimeCache = (options?: { namespace?: string }) => RuntimeCacheLike;

const CACHE_NAMESPACE = 'skiplock';

/**
 * The hint store on Vercel's Runtime Cache (`getCache()` of `@vercel/functions`): undefined off
 * Vercel — unless RUNTIME_CACHE_ENDPOINT is set — so that `next dev`, a server of your own and tests
 * query the database on every tick (off Vercel, `getCache()` is a map in each process, which other
 * processes' enqueues would never reach). A Next.js app passes `getCache` (imported from
 * `@vercel/functions`): Next's file tracing does not carry a package that is only loaded at run time.
 * Either way the keys are under the namespace `skiplock`.
 * @param options.getCache @defaultValue getCache of `@vercel/functions`, loaded on first use
 * @param options.env @defaultValue process.env
 */
export function vercelRuntimeCache(options: { getCache?: GetRuntimeCache; env?: Env } = {}): IdleHintStore | undefined {
  const env = options.env ?? process.env;
  if (env.VERCEL !== '1' && !env.RUNTIME_CACHE_ENDPOINT) return undefined;
  let cache: Promise<RuntimeCacheLike> | undefined;
  const open = () => {
    cache ??= (options.getCache ? Promise.resolve(options.getCache) : loadGetCache()).then((get) =>
      get({ namespace: CACHE_NAMESPACE }),
    );
    cache.catch(() => {
      cache = undefined; // installed later: try again on the next tick
    });
    return cache;
  };
  return {
    async get(key) {
      const value = await (await open()).get(key);
      return typeof value === 'string' ? value : undefined;
    },
    async set(key, value, ttlMs) {
      // The Runtime Cache counts its TTL in whole seconds.
      await (await open()).set(key, value, { ttl: Math.max(1, Math.ceil(ttlMs / 1000)), name: key });
    },
  };
}

/** One default store per environment object: what a process coalesces and logs once is per store. */
const defaults = new WeakMap<Env, IdleHintStore | undefined>();

/**
 * The hint store a route or nudger uses when it is given none: Vercel's Runtime Cache on Vercel,
 * none elsewhere or with SKIPLOCK_IDLE=false (every tick queries the database).
 */
export function defaultIdleHints(env: Env): IdleHintStore | undefined {
  if (env.SKIPLOCK_IDLE === 'false' || env.SKIPLOCK_IDLE === '0') return undefined;
  if (!defaults.has(env)) defaults.set(env, vercelRuntimeCache({ env }));
  return defaults.get(env);
}

async function loadGetCache(): Promise<GetRuntimeCache> {
  const functions = await importOptionalPeer(
    () => import(/* webpackIgnore: true */ /* turbopackIgnore: true */ '@vercel/functions'),
    () =>
      new ConfigError(
        'idle ticks keep their hints in the Runtime Cache of @vercel/functions, which is not installed: add it to ' +
          'your app (npm install @vercel/functions), or pass idleHints: false',
      ),
  );
  if (typeof functions.getCache !== 'function') {
    throw new Error('this @vercel/functions has no getCache (the Runtime Cache): use version 2.2 or later');
  }
  return functions.getCache;
}

export {
  hintAfterRun,
  IDLE_DEFAULTS,
  type IdleCheck,
  type IdleHintStore,
  IdleHints,
  memoryIdleHints,
  type WakeHint,
  type WakeReason,
} from './web/idle.js';
