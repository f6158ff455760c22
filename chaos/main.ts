/**
 * `npm run chaos [-- --driver pg|neon-ws|neon-http] [--quick] [--jobs N] [--processes N] [--kills N] [--concurrency N] [--keep] [--delete]
 * [--max-invocations N] [--stepped-every N] [--batched-every N]`:
 * the chaos harness. Prints progress, a detail line and the final `chaos: …` line; exits 1 when any
 * job was lost, any write landed under a stale token, a completed step ran again (`step_reruns`), a
 * transactional step's row was not written exactly once, a signal was lost (`signals_lost`), or any
 * other check failed.
 */
import { DRIVERS, type Driver } from '../db/connect.js';
import { FULL, QUICK, runChaos } from './harness.js';

const args = process.argv.slice(2);
const text = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const driver = (text('--driver') ?? 'pg') as Driver;
if (!DRIVERS.includes(driver)) {
  console.error(`--driver must be one of ${DRIVERS.join(', ')}`);
  process.exit(2);
}
const value = (name: string) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : undefined;
};
const base = args.includes('--quick') ? QUICK : FULL;
const options = {
  ...base,
  driver,
  jobs: value('--jobs') ?? base.jobs,
  processes: value('--processes') ?? base.processes,
  targetKills: value('--kills') ?? base.targetKills,
  // Each worker's concurrency and batch size (above 128, outcomes are settled in a statement of their own).
  concurrency: value('--concurrency') ?? base.concurrency,
  keepSchema: args.includes('--keep'),
  // Workers delete completed jobs (completedJobs 'delete'); the audit records each deletion.
  completedJobs: args.includes('--delete') ? ('delete' as const) : ('keep' as const),
  // A cap on running invocations, with fan-out and nudges (each start dropped or doubled at random).
  maxInvocations: value('--max-invocations') ?? 0,
  // One job in N is stepped (five durable steps, half of them waiting for a signal).
  steppedEvery: value('--stepped-every') ?? 16,
  // One job in N is of the batch kind (n % N = 11; 0: none).
  batchedEvery: value('--batched-every') ?? 16,
  // Jobs enqueued through the driver under test while faults are on (a share of --jobs), and dead
  // jobs replayed through it.
  liveShare: value('--live-share') ?? 0.1,
  replays: value('--replays') ?? 20,
  databaseUrl: process.env.DATABASE_URL,
  progress: (line: string) => console.log(line),
};
console.log(
  `chaos run on ${driver}: ${options.jobs} jobs, ${options.processes} worker processes, ≥${options.targetKills} kills, concurrency ${options.concurrency}, faults in the ${driver} stand-in, completed jobs ${options.completedJobs === 'delete' ? 'deleted' : 'kept'}`,
);
try {
  const report = await runChaos(options);
  console.log(report.detail);
  console.log(report.batchLine);
  console.log(report.line);
  process.exit(report.failed ? 1 : 0);
} catch (err) {
  console.error(`chaos harness failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(2);
}
