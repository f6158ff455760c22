/**
 * What a durable step costs: `npm run bench:steps [-- --json] [-- --reps=N]` (esbuild bundles
 * this file to .bench/steps.mjs, then `node .bench/steps.mjs`). For N = 1, 10, 100 no-op steps
 * per job, skiplock's `ctx.step` on each driver (pg, neon-ws and neon-http through the local stand-ins of
 * 'skiplock/testing') and DBOS Transact's `DBOS.runStep` (installed apart, in DBOS_DIR, default
 * /tmp/dbos-bench), each against the same job with the step bodies called directly. The overhead
 * is the median over pairs of the difference: time inside the handler (workflow function),
 * statements counted at the client over the whole invocation (workflow call).
 */
import { writeFileSync } from 'node:fs';
import { connect, DRIVERS } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { startLocalNeon } from '../testing/neon-local.js';
import { dropDatabase, freshDatabase, withClient } from './db.js';
import { DBOS_CLASSES, dbosRunner } from './steps/dbos.js';
import { measureSteps, type Row, renderBreakdown, renderTable } from './steps/measure.js';
import { SKIPLOCK_CLASSES, skiplockRunner } from './steps/skiplock.js';

const args = process.argv.slice(2);
const asJson = args.includes('--json');
const reps = Number(args.find((a) => a.startsWith('--reps='))?.slice(7) ?? 25);
const dbosDir = process.env.DBOS_DIR ?? '/tmp/dbos-bench';
const STEPS = [1, 10, 100];
const options = { reps, warmup: 3 };
const log = (line: string) => (asJson ? process.stderr : process.stdout).write(`${line}\n`);

const database = await resolveTestDatabase();
const serverVersion = await withClient(database.url, async (c) =>
  String((await c.query('show server_version')).rows[0].server_version),
);
const url = await freshDatabase(database.url, 'skiplock_bench_steps');
const admin = connect({ connectionString: url, max: 1 });
await migrate(admin);
const neon = await startLocalNeon();
const rows: Row[] = [];

for (const driver of DRIVERS) {
  const runner = skiplockRunner(url, driver, admin, neon.neon);
  for (const n of STEPS) {
    rows.push(
      await measureSteps({ system: 'skiplock', driver }, runner.run, n, { ...options, classes: SKIPLOCK_CLASSES }),
    );
    log(`  skiplock ${driver} ${n} steps: ${rows.at(-1)?.msPerStep.toFixed(3)} ms/step`);
  }
  await runner.close();
}

// DBOS last: it is a process-wide singleton with background loops of its own.
const dbosUrl = await freshDatabase(database.url, 'skiplock_bench_steps_dbos');
let dbos: { version?: string; error?: string } = {};
try {
  const runner = await dbosRunner(dbosDir, dbosUrl);
  dbos = { version: runner.version };
  for (const n of STEPS) {
    rows.push(
      await measureSteps({ system: 'dbos', driver: 'pg' }, runner.run, n, { ...options, classes: DBOS_CLASSES }),
    );
    log(`  dbos pg ${n} steps: ${rows.at(-1)?.msPerStep.toFixed(3)} ms/step`);
  }
  await runner.close();
} catch (err) {
  dbos = { error: (err as Error).message };
}

const report = [
  '# Durable steps: what a step costs',
  '',
  `Run: ${new Date().toISOString().slice(0, 10)} by \`npm run bench:steps\`. Postgres ${serverVersion}, Node ${process.version}, client and server on the same 2-core machine; ${reps} pairs per line. ms = the median over pairs of (durable − direct) time inside the handler (DBOS: the workflow function); statements counted at the client. neon-ws and neon-http run through the local stand-ins of 'skiplock/testing': compare the drivers with each other, not with Neon's latency.`,
  '',
  `DBOS Transact: ${dbos.version ?? `not run: ${dbos.error}`} (DBOS.runStep in a long-lived process, on the same Postgres).`,
  '',
  renderTable(rows),
  '',
  'Extra statements per 100-step job, by kind:',
  '',
  renderBreakdown(rows),
  '',
].join('\n');
if (asJson) {
  console.log(JSON.stringify({ serverVersion, node: process.version, reps, dbos, rows }, null, 2));
} else {
  log(`\n${report}`);
  writeFileSync('bench/RESULTS.steps.md', report);
  log('wrote bench/RESULTS.steps.md');
}

await admin.close();
await neon.close();
await dropDatabase(database.url, 'skiplock_bench_steps');
await dropDatabase(database.url, 'skiplock_bench_steps_dbos');
await database.stop();
process.exit(0);
