/**
 * `npm run drill:upgrade [-- --rows N] [-- --json]`: an upgrade under load (drill/upgrade/run.ts),
 * with skiplock's online migrator and, for comparison, the pre-release blocking way.
 */
import { resolveTestDatabase } from '../../scripts/local-postgres.js';
import { runUpgradeDrill, timedPhases, UPGRADE_FULL } from './run.js';

const args = process.argv.slice(2);
const json = args.includes('--json');
const rowsAt = args.indexOf('--rows');
const rows = rowsAt >= 0 ? Number(args[rowsAt + 1]) : UPGRADE_FULL.rows;
const say = (line: string) => (json ? process.stderr.write(`${line}\n`) : console.log(line));
const database = await resolveTestDatabase();
const options = { ...UPGRADE_FULL, rows, databaseUrl: database.url, phases: timedPhases(UPGRADE_FULL), progress: say };
say(
  `upgrade drill: ${rows.toLocaleString('en')} jobs, 2 workers, an enqueue every ${options.enqueueEveryMs} ms, a ${options.readMs / 1000} s read open on jobs when the migration arrives`,
);
try {
  const online = await runUpgradeDrill(options, 'online');
  say(`online: ${JSON.stringify(online)}`);
  const blocking = await runUpgradeDrill(options, 'blocking');
  say(`blocking (pre-release migrator): ${JSON.stringify(blocking)}`);
  if (json) console.log(JSON.stringify({ online, blocking }, null, 2));
} finally {
  await database.stop();
}
