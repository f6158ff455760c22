/**
 * Dev probe for issue 41: the flow phase (bench/run.ts, phase 8) A/B in one run — this tree's
 * skiplock against another tree's (AB_BASE, e.g. an export of main: `git archive main | tar -x -C
 * /tmp/main-copy`, its node_modules linked to this one's) and pg-boss, alternating, K = 4, 50,000
 * jobs (AB_JOBS), 3 repetitions (AB_REPS), medians. Cases (argv): perKey, ordering, plain.
 * `npx tsx bench/probe-ab-flow.ts perKey ordering plain`
 */
import { freshDatabase, vacuumAnalyze } from './db.js';
import { pgBossSystem } from './systems/pgboss.js';
import { skiplockSystem } from './systems/skiplock.js';
import type { BenchSystem, Flow } from './systems/types.js';

const base = process.env.AB_BASE ?? '/tmp/main-copy';
const jobs = Number(process.env.AB_JOBS ?? 50_000);
const reps = Number(process.env.AB_REPS ?? 3);
const cases = process.argv.slice(2);
const server = 'postgres://postgres@127.0.0.1:5432/postgres';
const baseline = (await import(`${base}/bench/systems/skiplock.ts`)) as { skiplockSystem: typeof skiplockSystem };
const flows: Record<string, Flow | undefined> = {
  perKey: { mode: 'perKey', keys: 1_000, perKey: 5 },
  ordering: { mode: 'ordering', keys: 1_000 },
  plain: undefined,
};
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
async function rate(make: () => BenchSystem): Promise<number> {
  const system = make();
  const url = await freshDatabase(server, 'bench_ab_flow');
  await system.setup(url);
  try {
    await system.enqueueBulk(jobs, 1_000);
    await vacuumAnalyze(url);
    const t = performance.now();
    await system.process(4);
    return Math.round(jobs / ((performance.now() - t) / 1000));
  } finally {
    await system.teardown();
  }
}
for (const name of cases) {
  const flow = flows[name];
  const makers: Record<string, () => BenchSystem> = {
    'skiplock (branch)': () => skiplockSystem(500, 'keep', 1, flow),
    'skiplock (main)': () => baseline.skiplockSystem(500, 'keep', 1, flow),
    ...(name === 'plain' ? {} : { 'pg-boss': () => pgBossSystem(500, flow) }),
  };
  const order = Object.keys(makers);
  const runs: Record<string, number[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    for (const n of order.map((_, i) => order[(i + rep) % order.length] as string)) {
      const r = await rate(makers[n] as () => BenchSystem);
      runs[n] = [...(runs[n] ?? []), r];
      console.log(`${name} rep ${rep} ${n}: ${r}`);
    }
  }
  console.log(
    `${name}: ${JSON.stringify(Object.fromEntries(order.map((n) => [n, { median: median(runs[n] ?? []), runs: runs[n] }])))}`,
  );
}
process.exit(0);
