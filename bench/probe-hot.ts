/**
 * Dev probe (issue 41): Node's CPU per hot statement on pg, the driver alone
 * (`npx tsx bench/probe-hot.ts [ROOT] [N] [LOOPS]`; ROOT: the tree whose db/drivers/pg-pool.ts runs,
 * this one by default, e.g. another worktree for an A/B). LOOPS pools of one connection each run N
 * hot statements one after another (a one-row select with a parameter: the transaction, the
 * settings and the answer, without the claim's work), after N / 10 to warm up. Prints the Node µs
 * (process.cpuUsage) and the wall µs per statement.
 */
import { resolve } from 'node:path';
import { sql } from 'drizzle-orm';

const root = resolve(process.argv[2] ?? '.');
const N = Number(process.argv[3] ?? 20_000);
const LOOPS = Number(process.argv[4] ?? 4);
const url = process.env.PROBE_SERVER ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const { namedRunner, openPgPool } = (await import(
  `${root}/db/drivers/pg-pool.ts`
)) as typeof import('../db/drivers/pg-pool.js');
const { poolSettings } = (await import(
  `${root}/db/connection-options.ts`
)) as typeof import('../db/connection-options.js');
const pools = Array.from({ length: LOOPS }, () => openPgPool(poolSettings({ connectionString: url, max: 1 }).settings));
const runners = pools.map((pool) => namedRunner(pool));
const loop = (count: number) =>
  Promise.all(
    runners.map(async (hot) => {
      for (let i = 0; i < count; i++) await hot(sql`select ${i}::int as n, now() as at`);
    }),
  );
await loop(N / 10);
const cpu0 = process.cpuUsage();
const t = performance.now();
await loop(N);
const wallUs = ((performance.now() - t) * 1000) / (N * LOOPS);
const cpu = process.cpuUsage(cpu0);
console.log(
  `${root}: ${N * LOOPS} hot statements on ${LOOPS} connections: node ${((cpu.user + cpu.system) / (N * LOOPS)).toFixed(2)} µs each (sys ${(cpu.system / (N * LOOPS)).toFixed(2)}), wall ${wallUs.toFixed(1)} µs`,
);
await Promise.all(pools.map((pool) => pool.end()));
