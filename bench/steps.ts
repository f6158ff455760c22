/**
 * What a durable step costs: `npm run bench:steps [-- --json] [-- --reps=N]` (esbuild bundles
 * this file to .bench/steps.mjs, then `node .bench/steps.mjs`). For N = 1, 10, 100 no-op steps
 * per job, skiplock's `ctx.step` on each driver (pg, neon-ws and neon-http through the local stand-ins of
 * 'skiplock/testing') and DBOS Transact's `DBOS.runStep` (installed apart, in DBOS_DIR, default
 * /tmp/dbos-bench), each against the same job with the step bodies called directly. The overhead
 * is the median over pairs of the difference: time inside the handler (workflow function),
 * statements counted at the client over the whole invocation (workflow call). Writes
 * bench/RESULTS.steps.json and bench/RESULTS.steps.md rendered from it; `--json` also prints the
 * record. Without DBOS installed in DBOS_DIR the run has no DBOS rows, and says so with the command
 * that installs it.
 */
import { writeFileSync } from 'node:fs';
import { connect, DRIVERS } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { resolveTestDatabase } from '../scripts/local-postgres.js';
import { startLocalNeon } from '../testing/neon-local.js';
import { dropDatabase, freshDatabase, withClient } from './db.js';
import { resultPath, today, writeResult } from './results.js';
import { DBOS_CLASSES, DBOS_DIR_DEFAULT, DbosNotInstalled, dbosRunner } from './steps/dbos.js';
import { measureSteps, type Row } from './steps/measure.js';
import { renderStepsPage, type StepsRecord } from './steps/report.js';
import { SKIPLOCK_CLASSES, skiplockRunner } from './steps/skiplock.js';

const args = process.argv.slice(2);
const asJson = args.includes('--json');
const reps = Number(args.find((a) => a.startsWith('--reps='))?.slice(7) ?? 25);
const dbosDir = process.env.DBOS_DIR ?? DBOS_DIR_DEFAULT;
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
  dbos = { error: err instanceof DbosNotInstalled ? err.short : (err as Error).message };
  // Said at once and again at the end, where it is not scrolled away.
  if (err instanceof DbosNotInstalled) log(err.message);
}

const record: StepsRecord = { date: today(), serverVersion, node: process.version, reps, dbos, rows };
const report = renderStepsPage(record);
writeResult(resultPath('steps'), record);
writeFileSync('bench/RESULTS.steps.md', report);
if (asJson) console.log(JSON.stringify(record, null, 2));
else log(`\n${report}`);
log('wrote bench/RESULTS.steps.json and bench/RESULTS.steps.md');
if (dbos.error) log(`\nDBOS Transact did not run: ${dbos.error}. DBOS's rows are missing from this run.`);

await admin.close();
await neon.close();
await dropDatabase(database.url, 'skiplock_bench_steps');
await dropDatabase(database.url, 'skiplock_bench_steps_dbos');
await database.stop();
process.exit(0);
