import { dropDatabase, freshDatabase, vacuumAnalyze } from '../db.js';
import { graphileSystem } from '../systems/graphile.js';
import { rawSystem } from '../systems/raw.js';
import { skiplockSystem } from '../systems/skiplock.js';
import type { BenchSystem } from '../systems/types.js';

/** What `npm run bench` uses: batch = concurrency = 500 per invocation, bulk enqueue in batches of 1,000. */
const BATCH = 500;
const ENQUEUE_BATCH = 1_000;

export const PROCESS_SYSTEMS = {
  skiplock: () => skiplockSystem(BATCH),
  'graphile-worker': () => graphileSystem(),
  raw_floor: () => rawSystem(BATCH, 'update'),
} as const satisfies Record<string, () => BenchSystem>;
export type ProcessSystem = keyof typeof PROCESS_SYSTEMS;
export type ProcessRow = Record<ProcessSystem, number>;

/**
 * 3. K concurrent invocations on no-op jobs: as `npm run bench`'s phase 2 (bench/run.ts), each
 * system on a fresh database with `jobs` jobs enqueued in bulk, vacuumed and analysed, then timed
 * from the start of processing to an empty queue. skiplock: K invocation loops, each with its own
 * connection, as K Lambda invocations would be; graphile-worker: one runner of concurrency K; the
 * raw floor: K independent SKIP LOCKED claimers. One run per system and K; the order of the
 * systems rotates with K.
 */
export async function measureProcess(
  server: string,
  database: string,
  ks: readonly number[],
  jobs: number,
  log: (line: string) => void,
): Promise<Record<string, ProcessRow>> {
  const names = Object.keys(PROCESS_SYSTEMS) as ProcessSystem[];
  const result: Record<string, ProcessRow> = {};
  for (const [i, k] of ks.entries()) {
    const row = {} as ProcessRow;
    for (const name of names.map((_, j) => names[(i + j) % names.length] as ProcessSystem)) {
      const system = PROCESS_SYSTEMS[name]();
      const url = await freshDatabase(server, database);
      await system.setup(url);
      try {
        await system.enqueueBulk(jobs, ENQUEUE_BATCH);
        await vacuumAnalyze(url);
        const t = performance.now();
        await system.process(k);
        row[name] = Math.round(jobs / ((performance.now() - t) / 1000));
      } finally {
        await system.teardown();
      }
    }
    result[String(k)] = { skiplock: row.skiplock, 'graphile-worker': row['graphile-worker'], raw_floor: row.raw_floor };
    log(`  K=${k} ${JSON.stringify(result[String(k)])}`);
  }
  await dropDatabase(server, database);
  return result;
}

/** The settings of each system, printed with the figures. */
export function processSettings(): Record<string, unknown> {
  return Object.fromEntries(Object.entries(PROCESS_SYSTEMS).map(([name, make]) => [name, make().settings]));
}
